"""The residual stream is the sum of its parts (embedding, every attention and feed-forward
output), the heads (through W_O, plus its bias) sum to the attention output, and the parts'
direct logit attributions sum to the traced logit."""
import numpy as np
import pytest

from tests.conftest import FIXTURES
from transformer_stepper import AblateHead, ModelError, load_model
from transformer_stepper.core.analysis.attribution import decompose

TEXT = "the queen rode to the bank of the river"


@pytest.mark.parametrize("family", [None, "gpt2_tiny_lm", "llama_tiny_gqa4", "gemma_tiny", "qwen2_tiny",
                                    "smollm3_tiny",
                                    "phi3_tiny", "phi4_mini_tiny", "pythia_tiny", "neox_tiny_sequential",
                                    "llama_tiny_yarn"],
                         ids=lambda f: f or "builtin")
def test_parts_sum_to_the_stream_and_attributions_to_the_logit(family):
    model = load_model(None if family is None else FIXTURES / family)
    trace = model.trace(TEXT)
    n_layer = model.config.n_layer
    for position in (0, trace.n_seq // 2, trace.n_seq - 1):
        for layer in range(n_layer):
            d = decompose(model, trace, position, layer)
            assert d.names[0] == "embedding" and len(d.parts) == 1 + 2 * (layer + 1)
            np.testing.assert_allclose(d.parts.sum(axis=0), trace.layer("layer_out", layer)[position],
                                       atol=1e-4, rtol=1e-5)
            heads = d.head_parts.sum(axis=1) + d.attn_bias            # [layer + 1, d]
            np.testing.assert_allclose(heads, d.parts[1::2], atol=1e-4, rtol=1e-5)
        last = decompose(model, trace, position)
        assert last.token_id == int(np.argmax(trace.logits[position]))
        assert last.logit == pytest.approx(float(trace.logits[position, last.token_id]), abs=1e-4, rel=1e-5)
        if not model.config.o_bias:        # no W_O bias: the heads are the whole attention part
            np.testing.assert_allclose(last.head_contributions.sum(axis=1), last.contributions[1::2],
                                       atol=1e-4, rtol=1e-5)
        other = decompose(model, trace, position, token_id=3)
        assert other.logit == pytest.approx(float(trace.logits[position, 3]), abs=1e-4, rel=1e-5)


def test_an_ablated_head_attributes_nothing():
    model = load_model(None)
    trace = model.trace(TEXT, interventions=[AblateHead(1, 2)])
    d = decompose(model, trace, 5)
    assert np.all(d.head_parts[1, 2] == 0) and d.head_contributions[1, 2] == 0


def test_post_ln_models_and_bad_positions_are_refused_in_one_line():
    bert = load_model(FIXTURES / "bert_tiny_mlm")
    with pytest.raises(ModelError, match="post-LN"):
        decompose(bert, bert.trace(TEXT), 1)
    model = load_model(None)
    with pytest.raises(ModelError, match="position 99"):
        decompose(model, model.trace(TEXT), 99)


@pytest.mark.parametrize("family", ["gemma2_tiny", "gemma3_tiny", "olmo2_tiny"])
def test_models_normalising_each_sublayer_output_are_refused_in_one_line(family):
    """Gemma 2/3 and OLMo 2 normalise attention's and the MLP's outputs before adding them: the
    heads' parts would not add up to what joins the stream, so no decomposition is offered."""
    model = load_model(FIXTURES / family)
    with pytest.raises(ModelError, match=r"^[a-z0-9_]+: each sublayer's output is normalised before it is added"):
        decompose(model, model.trace(TEXT), 1)


@pytest.mark.parametrize("family", [None, "gpt2_tiny_lm", "qwen2_tiny", "llama_tiny_gqa4"],
                         ids=lambda f: f or "builtin")
def test_layer_bars_split_each_layer_into_heads_and_ffn(family):
    model = load_model(None if family is None else FIXTURES / family)
    trace = model.trace(TEXT)
    for layer in (0, model.config.n_layer - 1):
        d = decompose(model, trace, trace.n_seq - 2, layer)
        bars, segments, values = d.layer_bars()
        n_head = model.config.n_head
        assert bars == ("embedding", *(f"layer {l}" for l in range(layer + 1)))
        assert segments[0] == "embedding" and segments[-1] == "FFN" and segments[n_head] == f"head {n_head - 1}"
        assert ("W_O bias" in segments) == model.config.o_bias
        assert values[0, 0] == d.contributions[0] and not values[0, 1:].any() and not values[1:, 0].any()
        per_layer = d.contributions[1::2] + d.contributions[2::2]          # attention + feed-forward
        np.testing.assert_allclose(values[1:].sum(axis=1), per_layer, atol=1e-5)
        assert values.sum() == pytest.approx(float(d.contributions.sum()), abs=1e-5)
        assert values.sum() + d.constant == pytest.approx(d.logit, abs=1e-5)
