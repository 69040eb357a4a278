"""Two encoder–decoders' stages A − B (core/analysis/seq2seq_stage_difference.py) and the
provenance of a difference (core/analysis/provenance/difference.py), on the T5, BART and Marian fixtures
against copies with noised weights: every drawn difference is trace A minus trace B, a model
against itself is exactly 0, other target ids are refused in one line naming the token; the
paired summands of a difference add up to the difference of the two sums."""
import numpy as np
import pytest

from tests.seq2seq_pairs import FIXTURES, noised_copy
from transformer_stepper import load_model
from transformer_stepper.core.analysis import stage_difference as sd
from transformer_stepper.core.analysis.provenance.difference import explain_difference, largest
from transformer_stepper.core.analysis.seq2seq_stage_difference import (CROSS_ARRAYS, CROSS_PER_HEAD,
                                                                         seq2seq_stage_difference)
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.model.seq2seq_stages import seq2seq_stages

SOURCE, TARGET = "The bank of the river.", "the river"


@pytest.fixture(scope="module", params=["t5_tiny", "bart_tiny", "marian_tiny"])
def pair(request, tmp_path_factory):
    model_a = load_model(str(FIXTURES / request.param))
    model_b = load_model(str(noised_copy(request.param, tmp_path_factory.mktemp(request.param))))
    trace_a = model_a.trace(SOURCE, TARGET)
    trace_b = model_b.trace(SOURCE, target_ids=trace_a.decoder.input_ids[1:])
    return model_a, trace_a, model_b, trace_b


def test_every_difference_is_a_minus_b_and_zero_against_itself(pair):
    model_a, trace_a, _, trace_b = pair
    layer, head = 1, 1
    for section, stage in seq2seq_stages(model_a.config):
        shown = seq2seq_stage_difference(trace_a, trace_b, section, stage.key, layer, head)
        itself = seq2seq_stage_difference(trace_a, trace_a, section, stage.key, layer, head)
        stack_a, stack_b = (trace_a.encoder, trace_b.encoder) if section == "Encoder" else (trace_a.decoder, trace_b.decoder)
        for item, same in zip(shown.deltas, itself.deltas):
            assert np.all(np.nan_to_num(same.delta) == 0) and same.size.relative == 0
            if stage.key != "cross_attention":
                continue
            read = (lambda s, n=item.name: s.head_array(n, layer, head)) if item.name in CROSS_PER_HEAD else \
                (lambda s, n=item.name: s.layer(n, layer))
            np.testing.assert_array_equal(item.delta, read(stack_a) - read(stack_b))
            assert item.size.relative > 0
    cross = seq2seq_stage_difference(trace_a, trace_b, "Decoder", "cross_attention", layer, head)
    assert [i.name for i in cross.items] == [n for n in CROSS_ARRAYS if n in trace_a.decoder.detail(layer)]
    assert cross.item("cross_attn_weights").delta.shape == (trace_a.decoder.n_seq, trace_a.encoder.n_seq)
    assert cross.item("cross_k").delta.shape[0] == trace_a.encoder.n_seq


def test_a_one_stack_stage_of_either_stack_is_that_stacks_difference(pair):
    _, trace_a, _, trace_b = pair
    for section, a, b in (("Encoder", trace_a.encoder, trace_b.encoder), ("Decoder", trace_a.decoder, trace_b.decoder)):
        shown = seq2seq_stage_difference(trace_a, trace_b, section, "feed_forward", 0, 0)
        assert shown.deltas[-1].name == "layer_out"
        np.testing.assert_array_equal(shown.item("mlp_out").delta, a.layer("mlp_out", 0) - b.layer("mlp_out", 0))
    prediction = seq2seq_stage_difference(trace_a, trace_b, "Decoder", "prediction")
    assert isinstance(prediction.item("kl"), sd.PerPosition) and prediction.item("kl").values.min() > 0


def test_other_target_ids_are_refused_in_one_line(pair):
    model_a, trace_a, model_b, _ = pair
    other = model_b.trace(SOURCE, target_ids=trace_a.decoder.input_ids[1:][::-1])
    with pytest.raises(ModelError) as caught:
        seq2seq_stage_difference(trace_a, other, "Decoder", "softmax", 0, 0)
    message = str(caught.value)
    assert message.startswith("the target: the tokenizers differ at token 1") and "\n" not in message
    assert repr(trace_a.decoder.tokens[1]) in message


def test_a_differences_provenance_pairs_the_summands(pair):
    model_a, trace_a, model_b, trace_b = pair
    decoder_a, decoder_b = model_a.stack_models()[1], model_b.stack_models()[1]
    layer, head, i, c = 1, 1, 2, 3
    d = explain_difference(decoder_a, trace_a.decoder, decoder_b, trace_b.decoder, "cross_head_outputs",
                           (layer, head, i, c))
    value_a = trace_a.decoder.head_array("cross_head_outputs", layer, head)[i, c]
    value_b = trace_b.decoder.head_array("cross_head_outputs", layer, head)[i, c]
    assert d.difference == float(value_a) - float(value_b) != 0
    # the summands, from the two traces' weights and values
    products = [trace.decoder.head_array("cross_attn_weights", layer, head)[i].astype(np.float64)
                * trace.decoder.head_array("cross_v", layer, head)[:, c] for trace in (trace_a, trace_b)]
    differences = products[0] - products[1]
    k = int(np.argmax(np.abs(differences)))
    top = largest(d)
    assert top.label.startswith(f"w_i{k} · v_{k}[{c}]") and top.difference == pytest.approx(differences[k], abs=1e-12)
    assert d.n_terms == trace_a.encoder.n_seq
    assert sum(t.difference for t in d.terms) + d.rest == pytest.approx(d.terms_difference, abs=1e-12)
    assert d.terms_difference == pytest.approx(float(value_a) - float(value_b), abs=1e-5)


def test_provenance_against_itself_is_zero_and_a_softmax_is_unpaired(pair):
    model_a, trace_a, model_b, trace_b = pair
    encoder_a, encoder_b = model_a.stack_models()[0], model_b.stack_models()[0]
    same = explain_difference(encoder_a, trace_a.encoder, encoder_a, trace_a.encoder, "q", (0, 1, 2, 3))
    assert same.difference == 0 and same.n_terms > 0 and all(t.difference == 0 for t in same.terms)
    weights = explain_difference(encoder_a, trace_a.encoder, encoder_b, trace_b.encoder, "attn_weights", (0, 1, 2, 1))
    assert weights.n_terms == 0 and weights.terms == () and "side by side" in weights.unpaired
    assert "\n" not in weights.unpaired and weights.a.traced != weights.b.traced
    assert weights.text().startswith("A − B of ")
