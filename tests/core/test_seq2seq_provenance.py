"""Provenance in an encoder–decoder (core/analysis/provenance/explain.py on either stack's trace): every kind of
value of the decoder — cross-attention scores, weights, head outputs, q, its output and
residual, T5's unscaled scores with their position bias, hidden values — and of the encoder
recomputes to the traced number, and its Python gives the same number."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.core.model.interventions import AblateHead
from transformer_stepper.core.analysis.provenance.explain import explain
from transformer_stepper.core.model.seq2seq_interventions import InStack
from transformer_stepper.io.loader import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DECODER = [("cross_scores", (1, 2, 1, 3)), ("cross_scores_raw", (0, 1, 2, 0)),
           ("cross_attn_weights", (1, 2, 2, 1)), ("cross_head_outputs", (1, 3, 1, 4)),
           ("cross_heads_concat", (0, 2, 9)), ("cross_q", (1, 0, 2, 5)), ("cross_attn_out", (1, 2, 7)),
           ("cross_residual", (0, 1, 3)), ("cross_attn_in", (1, 2, 4)), ("mlp_residual", (1, 2, 6)),
           ("mlp_in", (0, 1, 2)), ("scores", (1, 1, 2, 1)), ("attn_weights", (0, 0, 2, 1)),
           ("hidden_states", (1, 2, 5)), ("hidden_states", (2, 1, 8)), ("layer_out", (0, 2, 3))]
ENCODER = [("scores", (0, 1, 3, 2)), ("scores", (1, 3, 0, 4)), ("hidden_states", (2, 3, 1))]


@pytest.fixture(scope="module", params=("t5_tiny", "bart_tiny", "marian_tiny"))
def traced(request):
    model = load_model(FIXTURES / request.param)
    trace = model.trace("The bank of the river.", "Das Ufer des")
    encoder, decoder = model.stack_models()
    return request.param, encoder, decoder, trace


def _check(model, trace, name, index):
    e = explain(model, trace, name, index)
    assert e.matches(), f"{name}{index}: recomputed {e.value} ≠ traced {e.traced}"
    scope = {"model": model, "trace": trace}
    exec(e.python, scope)
    assert np.isclose(scope["value"], e.traced, atol=1e-4), f"{name}{index}: Python gives {scope['value']}"
    return e


@pytest.mark.parametrize("name, index", DECODER)
def test_decoder_values_recompute(traced, name, index):
    _, _, decoder, trace = traced
    _check(decoder, trace.decoder, name, index)


@pytest.mark.parametrize("name, index", ENCODER)
def test_encoder_values_recompute(traced, name, index):
    _, encoder, _, trace = traced
    _check(encoder, trace.encoder, name, index)


def test_t5_scores_say_not_scaled_and_add_the_bias(traced):
    family, _, decoder, trace = traced
    e = _check(decoder, trace.decoder, "scores", (1, 1, 2, 1))
    labels = " ".join(s.label for s in e.steps)
    if family == "t5_tiny":
        assert "not scaled" in labels and "position bias" in labels and "decoder_position_bias" in e.python
    else:
        assert "1/√d_head" in labels and "bias" not in labels
    cross = _check(decoder, trace.decoder, "cross_scores", (1, 2, 1, 3))
    assert "mask" not in " ".join(s.label for s in cross.steps)


def test_an_ablated_cross_head_output_is_explained_as_zero(traced):
    _, _, decoder, _ = traced
    model = load_model(FIXTURES / traced[0])
    trace = model.trace("The bank of the river.", "Das", interventions=[InStack("cross", AblateHead(1, 2))])
    e = _check(model.stack_models()[1], trace.decoder, "cross_head_outputs", (1, 2, 0, 3))
    assert e.value == 0.0 and "ablated" in e.steps[-1].label


@pytest.mark.parametrize("family", ("t5_tiny", "bart_tiny"))
def test_a_decoder_logit_with_the_heads_scaling_and_bias(family):
    from transformer_stepper.core.model.seq2seq import expected_seq2seq_shapes
    from transformer_stepper.core.trace.seq2seq_model import Seq2SeqModel

    loaded = load_model(FIXTURES / family)
    params = {n: np.array(loaded.params[n]) for n in expected_seq2seq_shapes(loaded.config)}
    if "final_logits_bias" in params:        # the fixture's is zero: make it count
        params["final_logits_bias"] = np.random.default_rng(0).normal(size=params["final_logits_bias"].shape)
    model = Seq2SeqModel(loaded.config, params, loaded.tokenizer)
    trace = model.trace("The bank of the river.", "Das Ufer")
    e = _check(model.stack_models()[1], trace.decoder, "logits", (1, 5))
    if family == "t5_tiny":
        assert "d_model^-0.5" in " ".join(e.notes)
    else:
        assert "final_logits_bias" in e.python and abs(params["final_logits_bias"][5]) > 0.01
