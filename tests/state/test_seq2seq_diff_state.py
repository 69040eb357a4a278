"""Two encoder–decoders side by side, as state (state/seq2seq_diff.py) on a ManualScheduler: B
opens against the window's translator and its trace is compared (both stacks, the
cross-attention); a new trace of A re-runs B and the latest wins; B's layer is prepared in a
worker; what cannot be compared is one line (another family, another shape, a tokenizer that
differs, naming the first differing token)."""
import json
import shutil

import numpy as np
import pytest

from tests.seq2seq_pairs import FIXTURES, noised_copy
from transformer_stepper import load_model
from transformer_stepper.state.seq2seq_diff import TwoTranslators

SOURCE = "The bank of the river."


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    return load_model(str(FIXTURES / "bart_tiny")), noised_copy("bart_tiny", tmp_path_factory.mktemp("bart_b"))


def test_open_then_a_new_trace_reruns_b_and_the_latest_wins(scheduler, bart):
    model_a, path_b = bart
    state = TwoTranslators(scheduler)
    seen = []
    state.events.changed.connect(lambda: seen.append(state.result))
    state.open_other(str(path_b), model_a, model_a.trace(SOURCE, "the river"))
    assert state.busy and state.result is None
    scheduler.run_all()
    assert not state.busy and state.message == "" and len(seen) == 1
    result = state.result
    np.testing.assert_array_equal(result.trace_b.decoder.input_ids, result.trace_a.decoder.input_ids)
    assert result.trace_b.source_text == SOURCE
    assert len(result.diff.encoder.layers) == model_a.config.encoder.n_layer
    assert len(result.diff.cross) == model_a.config.decoder.n_layer and result.diff.cross[0].divergence.max() > 0
    # a step and a retyped target before the worker runs: only the last is shown
    state.set_trace(model_a, model_a.trace(SOURCE, "the"))
    first = scheduler.jobs[0][0]
    state.set_trace(model_a, model_a.trace(SOURCE, "the river bank"))
    assert first.cancelled
    scheduler.run_all()
    np.testing.assert_array_equal(state.result.trace_b.decoder.input_ids,
                                  model_a.trace(SOURCE, "the river bank").decoder.input_ids)
    # B's layer detail, prepared in a worker
    ready = []
    state.events.ready.connect(ready.append)
    state.set_layer(1)
    assert not state.result.trace_b.decoder.is_ready(1) or ready == []
    scheduler.run_all()
    assert ready == [1] and state.result.trace_b.decoder.is_ready(1) and state.result.trace_b.encoder.is_ready(1)
    state.close_other()
    assert state.model_b is None and state.result is None


def test_the_same_translator_against_itself_is_zero(scheduler):
    model_a = load_model(str(FIXTURES / "t5_tiny"))
    state = TwoTranslators(scheduler)
    state.open_other(str(FIXTURES / "t5_tiny"), model_a, model_a.trace(SOURCE, "the"))
    scheduler.run_all()
    diff = state.result.diff
    assert all(h.relative == 0 for h in diff.encoder.hidden + diff.decoder.hidden)
    assert all(c.divergence.max() == 0 and c.added == 0 for c in diff.cross)
    assert diff.decoder.output.kl_at.max() == 0 and diff.decoder.output.top1_agree == 1


def test_what_cannot_be_compared_is_one_line(scheduler, bart, tmp_path):
    model_a, _ = bart
    trace = model_a.trace(SOURCE, "the")
    state = TwoTranslators(scheduler)
    for path, words in ((FIXTURES / "t5_tiny", "architectures differ"), (FIXTURES / "gpt2_tiny_lm", "not an encoder–decoder"),
                        (tmp_path / "missing", "missing")):
        state.open_other(str(path), model_a, trace)
        scheduler.run_all()
        assert state.result is None and words in state.message and "\n" not in state.message
    # the same weights with two pieces' ids swapped in B's vocabulary
    other = tmp_path / "swapped"
    shutil.copytree(FIXTURES / "bart_tiny", other)
    tokenizer = json.loads((other / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    piece = trace.encoder.tokens[2]
    partner = next(p for p in vocab if p not in trace.encoder.tokens and vocab[p] > 10)
    vocab[piece], vocab[partner] = vocab[partner], vocab[piece]
    (other / "tokenizer.json").write_text(json.dumps(tokenizer))
    state.open_other(str(other), model_a, trace)
    scheduler.run_all()
    assert state.result is None and "\n" not in state.message
    assert state.message.startswith("the source: the tokenizers differ at token 2"), state.message
    assert repr(piece) in state.message


def test_a_target_piece_read_otherwise_by_b_is_refused_naming_it(scheduler, bart, tmp_path):
    model_a, _ = bart
    trace = model_a.trace(SOURCE, "money")
    piece = next(t for t in trace.decoder.tokens[1:] if t not in trace.encoder.tokens)
    other = tmp_path / "swapped_target"
    shutil.copytree(FIXTURES / "bart_tiny", other)
    tokenizer = json.loads((other / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    partner = next(p for p in vocab if p not in trace.encoder.tokens + trace.decoder.tokens and vocab[p] > 10)
    vocab[piece], vocab[partner] = vocab[partner], vocab[piece]
    (other / "tokenizer.json").write_text(json.dumps(tokenizer))
    state = TwoTranslators(scheduler)
    state.open_other(str(other), model_a, trace)
    scheduler.run_all()
    t = list(trace.decoder.tokens).index(piece)
    assert state.result is None and "\n" not in state.message
    assert state.message.startswith(f"the target: the tokenizers differ at token {t}: the open translator reads id "
                                    f"{int(trace.decoder.input_ids[t])} as {piece!r}"), state.message


def test_a_stacks_view_state_hands_b_on_once_its_layer_is_prepared(bart):
    from transformer_stepper.state.seq2seq_diff import ShowsAgainst, prepare
    from transformer_stepper.state.view import ViewModel

    class StackModel(ShowsAgainst, ViewModel):
        pass

    model_a, path_b = bart
    model_b = load_model(str(path_b))
    trace_a = model_a.trace(SOURCE, "the")
    trace_b = model_b.trace(SOURCE, target_ids=trace_a.decoder.input_ids[1:])
    encoder_a, _ = model_a.stack_models()
    state = StackModel(encoder_a, trace_a.encoder, layer=1)
    heard = []
    state.events.shownTraceChanged.connect(lambda: heard.append(state.against))
    state.set_against(trace_b.encoder, model_b, ("A", "B"), False)
    assert state.against is None and not state.waiting_for_against          # A − B off
    state.set_against(trace_b.encoder, model_b, ("A", "B"), True)
    assert not trace_b.encoder.is_ready(1)
    assert state.against is None and state.waiting_for_against              # B's layer 1 not prepared yet
    prepare(trace_b, 1)
    state.against_ready()
    assert state.against is trace_b.encoder and state.against_model is model_b and not state.waiting_for_against
    assert heard[-1] is trace_b.encoder and state.pair_names == ("A", "B")


def test_a_layer_chosen_while_b_runs_is_prepared_when_b_lands(scheduler, bart):
    model_a, path_b = bart
    state = TwoTranslators(scheduler)
    state.open_other(str(path_b), model_a, model_a.trace(SOURCE, "the"))
    scheduler.run_all()
    state.set_trace(model_a, model_a.trace(SOURCE, "the river"))     # B re-runs for layer 0 …
    state.set_layer(1)                                                # … and the user turns to layer 1
    ready = []
    state.events.ready.connect(ready.append)
    scheduler.run_all()
    trace_b = state.result.trace_b
    assert len(trace_b.decoder.input_ids) == len(model_a.trace(SOURCE, "the river").decoder.input_ids)
    assert trace_b.decoder.is_ready(1) and trace_b.encoder.is_ready(1) and ready[-1] == 1
