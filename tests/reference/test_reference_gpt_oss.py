"""gpt-oss (tests/fixtures/gpt_oss_tiny, a config copying openai/gpt-oss-20b's; its Hugging Face
reference in tests/reference/test_reference_moe.py): each of its differences is needed to match
transformers, the sinks' share is what the softmax gives the extra column, and a softmax derived
a head at a time (a layer kept per head, a temperature) reads the sinks as the pass does."""
from __future__ import annotations

import numpy as np
import pytest

from reference_helpers import ATOL, HF_OUTPUTS, load_reference, reference_texts
from transformer_stepper import load_model
from transformer_stepper.core.trace.model import Model

pytestmark = pytest.mark.reference
NAME = "gpt_oss_tiny"


@pytest.fixture(scope="module")
def model(fixtures_dir):
    return load_model(fixtures_dir / NAME)


@pytest.fixture(scope="module")
def reference():
    return load_reference(HF_OUTPUTS / f"{NAME}.npz")


def _logits(model, changes: dict, text: str) -> np.ndarray:
    changed = Model(model.config.replace(**changes), model.params, model.tokenizer, model.source)
    return changed.trace(text).logits


def test_the_config_is_gpt_oss_20bs(model):
    c = model.config
    assert (c.n_expert, c.n_expert_used, c.router_order, c.router_bias) == (32, 4, "topk_softmax", True)
    assert c.attn_sinks and c.clamped_swiglu and (c.swiglu_alpha, c.swiglu_limit) == (1.702, 7.0)
    assert (c.local_layers, c.sliding_window) == ((0,), 6) and c.qkv_bias and c.o_bias and c.mlp_bias
    assert (c.rope_scaling, c.rope_factor, c.rope_original_n_ctx, c.rope_truncate, c.rope_theta) == \
        ("yarn", 32.0, 4096, False, 150000.0)


@pytest.mark.parametrize("changes", [
    dict(attn_sinks=False),                    # no sink column
    dict(clamped_swiglu=False),                # silu(gate) · up, no clamp, no + 1
    dict(swiglu_limit=1e9),                    # the clamp itself acts on this fixture
    dict(router_bias=False),
    dict(rope_truncate=True),                  # YaRN's ramp rounded to whole dimensions
    dict(local_layers=(), sliding_window=0),   # no window
    dict(local_layers=(0, 1)),                 # the window on the full layer too
], ids=lambda c: ",".join(c))
def test_each_difference_is_needed(model, reference, changes):
    text = reference_texts(reference)[1]                       # 32 tokens: past the window of 6
    assert np.abs(model.trace(text).logits - reference["logits_1"]).max() <= ATOL
    assert np.abs(_logits(model, changes, text) - reference["logits_1"]).max() > 10 * ATOL


def test_the_two_router_orders_give_the_same_gates(model, reference):
    """Top-k of the logits then their softmax (gpt-oss) = the normalised top-k of the softmax
    over every expert (Mixtral's order), up to float rounding."""
    text = reference_texts(reference)[2]
    np.testing.assert_allclose(_logits(model, dict(router_order="softmax_topk"), text), reference["logits_2"],
                               atol=ATOL, rtol=0)


def test_the_sinks_share_is_the_extra_columns_softmax(model, reference):
    trace = model.trace(reference_texts(reference)[2])
    for layer in range(model.config.n_layer):
        scores = trace.layer("scores", layer).astype(np.float64)            # [n_head, n, n], -inf masked
        sinks = np.asarray(model.params[f"h.{layer}.attn.sinks"], dtype=np.float64)[:, None, None]
        top = np.maximum(scores.max(axis=-1, keepdims=True), sinks)
        total = np.exp(scores - top).sum(axis=-1, keepdims=True) + np.exp(sinks - top)
        share = trace.layer("sink_weights", layer)
        np.testing.assert_allclose(share, np.exp(sinks - top) / total, atol=1e-6)
        np.testing.assert_allclose(trace.layer("attn_weights", layer), np.exp(scores - top) / total, atol=1e-6)
        np.testing.assert_allclose(trace.layer("attn_weights", layer).sum(axis=-1, keepdims=True) + share, 1.0,
                                   atol=1e-6)
        assert share.max() > 0.5 and share.min() < 0.05              # a visible, varied share


def test_a_head_derived_alone_reads_the_sinks_as_the_pass(model, reference):
    from transformer_stepper import HeadTemperature

    text = reference_texts(reference)[2]
    for interventions in ((), (HeadTemperature(1, 3, 2.0),)):
        trace = model.trace(text, interventions=list(interventions))
        for layer in range(model.config.n_layer):
            whole = trace.layer("attn_weights", layer)
            headwise = trace.detail(layer).headwise()
            assert headwise.per_head
            for head in range(model.config.n_head):
                np.testing.assert_array_equal(headwise.head("attn_weights", head), whole[head])
    hot = model.trace(text, interventions=[HeadTemperature(1, 3, 2.0)])
    assert not np.allclose(hot.layer("sink_weights", 1)[3], model.trace(text).layer("sink_weights", 1)[3])


# -- GGUF (tests/make_moe_gguf_fixtures.py; both files against HF: test_reference_moe_gguf.py) --

def test_a_gguf_reads_llama_cpps_names_and_metadata(model, fixtures_dir):
    gguf_model = load_model(fixtures_dir / "gguf_moe" / "gpt_oss_tiny.F32.gguf")
    assert gguf_model.config.replace(name="", ln_eps=model.config.ln_eps) == model.config.replace(name="")
    for name in ("h.1.attn.sinks", "h.1.ln_2.g", "h.0.moe.router.b", "h.0.moe.expert.7.gate.w",
                 "h.0.moe.expert.7.up.b", "h.1.moe.expert.30.proj.w", "h.1.moe.expert.30.proj.b", "h.0.attn.o.b"):
        np.testing.assert_array_equal(gguf_model.params[name], model.params[name])


def test_mxfp4_experts_are_dequantized_as_gguf_py_does_and_only_those_routed(fixtures_dir):
    import gguf

    path = fixtures_dir / "gguf_moe" / "gpt_oss_tiny.MXFP4.gguf"
    gguf_model = load_model(path)
    stored = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    tensor = stored["blk.1.ffn_up_exps.weight"]
    assert tensor.tensor_type == gguf.GGMLQuantizationType.MXFP4
    rows = gguf.quants.dequantize(tensor.data, tensor.tensor_type)      # [E, d_expert, d_model]
    np.testing.assert_array_equal(gguf_model.params["h.1.moe.expert.9.up.w"], rows[9].T)
    read: list[tuple[str, int]] = []
    for f in gguf_model.params.ckpt.files:
        original = f.expert

        def counting(name, expert, original=original):
            read.append((name, expert))
            return original(name, expert)
        f.expert = counting
    trace = gguf_model.trace("She went to the bank")
    chosen = {(layer, int(e)) for layer in (0, 1) for e in np.unique(trace.layer("expert_ids", layer))}
    weights = {(int(name.split(".")[1]), e) for name, e in read if name.endswith("_exps.weight")}
    assert weights == chosen and len(chosen) < 2 * gguf_model.config.n_expert


def test_the_softmax_views_what_if_temperature_divides_the_sink_too(model, reference):
    from transformer_stepper import HeadTemperature
    from transformer_stepper.core.model import measures

    text = reference_texts(reference)[2]
    trace = model.trace(text)
    scores, sink = trace.layer("scores", 1)[3], float(model.params["h.1.attn.sinks"][3])
    np.testing.assert_allclose(measures.softmax_with_temperature(scores, 1.0, sink), trace.layer("attn_weights", 1)[3],
                               atol=1e-6)
    np.testing.assert_allclose(measures.sink_share(scores, 1.0, sink), trace.layer("sink_weights", 1)[3, :, 0],
                               atol=1e-6)
    hot = model.trace(text, interventions=[HeadTemperature(1, 3, 2.0)])      # the pass at T = 2
    np.testing.assert_allclose(measures.softmax_with_temperature(scores, 2.0, sink), hot.layer("attn_weights", 1)[3],
                               atol=1e-6)
    np.testing.assert_allclose(measures.sink_share(scores, 2.0, sink), hot.layer("sink_weights", 1)[3, :, 0],
                               atol=1e-6)
