"""Two models side by side, as state (state/model_diff.py) on a ManualScheduler: B opens and the
open text is compared; every new trace of A re-runs B and the latest wins (an older diff still
running is cancelled, a stale one dropped); a model that cannot be compared is a one-line
message; a new model A of another shape is refused until B fits again."""
import numpy as np

from tests.builders import random_params, tiny_config, tokenizer_for, write_npz_model
from transformer_stepper import load_model
from transformer_stepper.state.model_diff import TwoModels


def write(tmp_path, name, seed, **changes):
    config = tiny_config("gpt2", **changes).replace(name=name)
    return write_npz_model(tmp_path / f"{name}.npz", config, random_params(config, seed=seed), tokenizer_for("gpt2"))


def test_open_then_typing_reruns_both_and_the_latest_wins(scheduler, tmp_path):
    model_a = load_model(write(tmp_path, "a", 1))
    path_b = write(tmp_path, "b", 2)
    state = TwoModels(scheduler)
    seen = []
    state.events.changed.connect(lambda: seen.append(state.result))
    state.open_other(str(path_b), model_a, model_a.trace("the bank of the river"))
    assert state.busy and state.result is None
    scheduler.run_all()
    assert not state.busy and state.message == "" and len(seen) == 1
    diff = state.result.diff
    assert diff.hidden[0].relative > 0 and len(diff.layers) == model_a.config.n_layer
    assert state.result.trace_b.text == "the bank of the river"
    # typing: two traces of A before the worker runs; only the last is shown
    state.set_trace(model_a, model_a.trace("the bank"))
    first_job = scheduler.jobs[0][0]
    state.set_trace(model_a, model_a.trace("the river bank"))
    assert first_job.cancelled
    scheduler.run_all()
    assert state.result.trace_a.text == "the river bank" and state.result.trace_b.text == "the river bank"
    np.testing.assert_array_equal(state.result.diff.input_ids, model_a.encode("the river bank").input_ids)
    # a head's pair of attention patterns, read in a worker
    state.request_attention(1, 2)
    scheduler.run_all()
    layer, head, weights_a, weights_b = state.pair
    assert (layer, head) == (1, 2)
    np.testing.assert_array_equal(weights_a, state.result.trace_a.layer("attn_weights", 1)[2])
    np.testing.assert_array_equal(weights_b, state.result.trace_b.layer("attn_weights", 1)[2])
    state.request_weights()
    scheduler.run_all()
    assert len(state.weights) == len(model_a.params) and state.weights[0][1] >= state.weights[-1][1] > 0


def test_what_cannot_be_compared_is_one_line(scheduler, tmp_path):
    model_a = load_model(write(tmp_path, "a", 1))
    state = TwoModels(scheduler)
    state.open_other(str(write(tmp_path, "wide", 2, d_ff=64)), model_a, model_a.trace("the bank"))
    scheduler.run_all()
    assert state.result is None and state.model_b is None
    assert "architectures differ" in state.message and "\n" not in state.message
    state.open_other(str(tmp_path / "missing.npz"), model_a, model_a.trace("the bank"))
    scheduler.run_all()
    assert "missing.npz" in state.message


def test_a_new_model_a_of_another_shape_is_refused(scheduler, tmp_path):
    model_a = load_model(write(tmp_path, "a", 1))
    state = TwoModels(scheduler)
    state.open_other(str(write(tmp_path, "b", 2)), model_a, model_a.trace("the bank"))
    scheduler.run_all()
    other = load_model(write(tmp_path, "other", 3, n_layer=3))
    state.set_trace(other, other.trace("the bank"))
    assert state.result is None and "architectures differ" in state.message and not scheduler.jobs
    state.close_other()
    assert state.model_b is None and state.message == ""


def test_while_hidden_only_the_latest_trace_runs_on_showing(scheduler, tmp_path):
    model_a = load_model(write(tmp_path, "a", 1))
    state = TwoModels(scheduler)
    state.open_other(str(write(tmp_path, "b", 2)), model_a, model_a.trace("the bank"))
    scheduler.run_all()
    state.set_active(False)
    for text in ("the river", "the river bank"):
        state.set_trace(model_a, model_a.trace(text))
    assert not scheduler.jobs and state.result.trace_a.text == "the bank"
    state.set_active(True)
    assert len(scheduler.jobs) == 1
    scheduler.run_all()
    assert state.result.trace_b.text == "the river bank"
