"""The scores' terms as the pass computed them: T5 does not scale q·k and adds its relative
position bias (self-attention only); BART scales by 1/√d_head. The terms a trace carries
rebuild its recorded scores exactly from q and k."""
from pathlib import Path

import numpy as np

from transformer_stepper.core.model.score_terms import score_bias, score_terms
from transformer_stepper.io.loader import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _rebuilt(trace, prefix, layer, mask):
    q, k = trace.layer(prefix + "q", layer), trace.layer(prefix + "k", layer)
    terms = score_terms(trace, prefix)
    scores = (q @ k.transpose(0, 2, 1)) * np.float32(terms.scale)
    if terms.bias_name:
        scores = scores + np.stack([score_bias(trace, prefix, h) for h in range(q.shape[0])])
    return scores if mask is None else scores + mask


def test_t5_scores_are_unscaled_plus_the_position_bias():
    model = load_model(FIXTURES / "t5_tiny")
    trace = model.trace("The bank of the river.", "Das Ufer")
    for stack, mask in ((trace.encoder, None), (trace.decoder, trace.decoder.attention_mask)):
        terms = score_terms(stack)
        assert terms.scale == 1.0 and terms.bias_name.endswith("position_bias")
        assert terms.formula() == "q·kᵀ (not scaled) + position bias"
        for layer in range(stack.config.n_layer):
            np.testing.assert_allclose(stack.layer("scores", layer), _rebuilt(stack, "", layer, mask),
                                       atol=1e-5, rtol=0)
    cross = score_terms(trace.decoder, "cross_")
    assert cross.scale == 1.0 and not cross.bias_name and cross.formula() == "q·kᵀ (not scaled)"
    np.testing.assert_allclose(trace.decoder.layer("cross_scores", 1),
                               _rebuilt(trace.decoder, "cross_", 1, None), atol=1e-5, rtol=0)


def test_the_decoder_bias_covers_every_target_row_after_a_step():
    model = load_model(FIXTURES / "t5_tiny")
    trace = model.trace("The bank of the river.", "Das Ufer")
    longer = model.extend(trace, [5])
    n = longer.decoder.n_seq
    assert longer.decoder["decoder_position_bias"].shape == (model.config.decoder.n_head, n, n)
    np.testing.assert_allclose(longer.decoder.layer("scores", 0),
                               _rebuilt(longer.decoder, "", 0, longer.decoder.attention_mask),
                               atol=1e-5, rtol=0)


def test_bart_scores_are_scaled_by_one_over_root_d_head():
    model = load_model(FIXTURES / "bart_tiny")
    trace = model.trace("The bank of the river.")
    d_head = model.config.encoder.d_head
    terms = score_terms(trace.encoder)
    assert terms.formula() == f"q·kᵀ/√{d_head}" and not terms.bias_name
    assert np.isclose(terms.scale, 1 / np.sqrt(d_head))
    np.testing.assert_allclose(trace.encoder.layer("scores", 0), _rebuilt(trace.encoder, "", 0, None),
                               atol=1e-5, rtol=0)
