"""The Stepper's "A − B" mode (core/analysis/stage_difference.py): every stage's difference is
trace A's array minus trace B's, element for element; a model against itself shows zeros (and
the same ids, experts and top tokens side by side); the sizes are the interventions' measure
with B as the clean pass."""
import numpy as np
import pytest

from tests.builders import random_params, tiny_config, tokenizer_for, wrap
from transformer_stepper.core.analysis import stage_difference as sd
from transformer_stepper.core.model import stages
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.trace.model import Model
from transformer_stepper.core.trace.layer_detail import PER_HEAD
from transformer_stepper.io.loader import load_model

TEXT = "the bank of the river and the money"


def make(kind: str, seed: int = 0, edit=None) -> Model:
    config = tiny_config(kind)
    params = dict(random_params(config, seed))
    if edit is not None:
        edit(params)
    return Model(config, params, wrap(tokenizer_for(kind)), source=f"tiny-{kind}")


def expected(trace_a, trace_b, name, layer, head):
    """The stage's array in A and in B, read through the trace's own accessors."""
    if layer is None:
        return trace_a.arrays[name], trace_b.arrays[name]
    if name in PER_HEAD:
        return trace_a.head_array(name, layer, head), trace_b.head_array(name, layer, head)
    return trace_a.layer(name, layer), trace_b.layer(name, layer)


def every_stage(config):
    for stage in stages.available_stages(config):
        for layer in (range(config.n_layer) if stage.per_layer else [0]):
            yield stage, layer, (config.n_head - 1 if stage.per_head else 0)


def perturb_layer_1_mlp(params):
    name = next(n for n in params if n.startswith("h.1.mlp") and n.endswith(".w"))
    params[name] = params[name] * np.float32(1.05)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
def test_every_difference_is_a_minus_b(kind):
    a = make(kind, edit=lambda p: p.__setitem__("wte", p["wte"] * np.float32(0.98)))
    b = make(kind)
    text = TEXT if kind != "bert" else "The bank of the river, and the money."
    trace_a, trace_b = a.trace(text), b.trace(text)
    seen = set()
    for stage, layer, head in every_stage(a.config):
        shown = sd.stage_difference(trace_a, trace_b, stage.key, layer, head)
        for item in shown.deltas:
            if item.name in ("layer_out", "expert_gates"):
                continue                     # checked below / in the MoE test
            seen.add(item.name)
            array_a, array_b = expected(trace_a, trace_b, item.name, shown.layer, head)
            with np.errstate(invalid="ignore"):                 # −∞ − −∞ (masked scores)
                want = np.asarray(array_a) - np.asarray(array_b)
            want = want.reshape(item.delta.shape)
            if item.name in ("scores_raw", "scores") and trace_a.mask is not None:
                want = np.where(trace_a.mask, np.nan, want)        # computed, never used
            finite = np.isfinite(want)
            np.testing.assert_array_equal(item.delta[finite], want[finite])
            assert np.all(np.isnan(item.delta[~finite]))          # −∞ in both: masked
            b64 = np.where(finite, np.asarray(array_b).reshape(want.shape), 0).astype(np.float64)
            d64 = np.where(finite, want, 0).astype(np.float64)
            assert item.size.relative == pytest.approx(np.linalg.norm(d64) / np.linalg.norm(b64), rel=1e-5)
            assert item.size.max_abs == pytest.approx(np.abs(d64).max(), rel=1e-6)
    assert {"token_embeddings", "q", "k", "v", "scores", "attn_weights", "head_outputs", "attn_out",
            "mlp_out"} <= seen
    # the embedding table changed: every stage drifts
    assert sd.stage_difference(trace_a, trace_b, "layer_output", 1).item("layer_out").size.relative > 0


def test_a_model_against_itself_shows_zero_everywhere():
    a, b = make("llama"), make("llama")
    trace_a, trace_b = a.trace(TEXT), b.trace(TEXT)
    for stage, layer, head in every_stage(a.config):
        shown = sd.stage_difference(trace_a, trace_b, stage.key, layer, head)
        for item in shown.items:
            if isinstance(item, sd.Delta):
                assert np.all(np.nan_to_num(item.delta) == 0.0), (stage.key, item.name)
                assert item.size.relative == 0.0 and item.size.max_abs == 0.0
            elif isinstance(item, sd.Pair):
                np.testing.assert_array_equal(item.a, item.b)
                np.testing.assert_array_equal(item.ids_a, item.ids_b)
            else:
                assert np.all(item.values == 0.0)               # KL of a model against itself


def test_a_changed_layer_leaves_the_layers_before_it_at_zero():
    a, b = make("gpt2", edit=perturb_layer_1_mlp), make("gpt2")
    trace_a, trace_b = a.trace(TEXT), b.trace(TEXT)
    before = sd.stage_difference(trace_a, trace_b, "feed_forward", 0)
    assert all(d.size.relative == 0.0 for d in before.deltas)
    after = sd.stage_difference(trace_a, trace_b, "feed_forward", 1)
    assert after.item("mlp_out").size.relative > 0
    assert sd.stage_difference(trace_a, trace_b, "prediction").item("kl").values.max() > 0


def test_token_ids_and_top_tokens_are_shown_side_by_side():
    a, b = make("gpt2", edit=perturb_layer_1_mlp), make("gpt2")
    trace_a, trace_b = a.trace(TEXT), b.trace(TEXT)
    ids = sd.stage_difference(trace_a, trace_b, "tokenize").item("input_ids")
    np.testing.assert_array_equal(ids.ids_a[:, 0], trace_a.input_ids)
    np.testing.assert_array_equal(ids.ids_b[:, 0], trace_b.input_ids)
    top = sd.stage_difference(trace_a, trace_b, "prediction").item("top_tokens")
    for trace, ids_, probs in ((trace_a, top.ids_a, top.a), (trace_b, top.ids_b, top.b)):
        logits = trace.logits.astype(np.float64)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        np.testing.assert_array_equal(ids_[:, 0], logits.argmax(axis=1))
        np.testing.assert_allclose(probs, np.take_along_axis(p, ids_, axis=1), rtol=1e-12)


def test_router_of_a_mixture_of_experts():
    b = load_model("tests/fixtures/qwen2_moe_tiny")
    params = {name: np.asarray(b.params[name]) for name in b.params}
    params["h.0.moe.router.w"] = params["h.0.moe.router.w"] * np.float32(1.5)
    a = Model(b.config, params, b.tokenizer, source="router scaled")
    text = "the cat sat on the mat"
    trace_a, trace_b = a.trace(text), b.trace(text)
    shown = sd.stage_difference(trace_a, trace_b, "router", 0)
    assert {i.name for i in shown.items} == {"router_logits", "router_probs", "expert_gates", "expert_ids"}
    logits = shown.item("router_logits")
    np.testing.assert_array_equal(logits.delta, trace_a.layer("router_logits", 0) - trace_b.layer("router_logits", 0))
    assert logits.size.relative == pytest.approx(0.5, rel=1e-5)      # the router's product × 1.5
    pair = shown.item("expert_ids")
    np.testing.assert_array_equal(pair.ids_a, trace_a.layer("expert_ids", 0))
    np.testing.assert_array_equal(pair.ids_b, trace_b.layer("expert_ids", 0))
    same = sd.stage_difference(trace_b, b.trace(text), "router", 1)
    assert all(d.size.relative == 0.0 for d in same.deltas)


def test_different_tokens_are_refused():
    a = make("gpt2")
    with pytest.raises(ModelError, match="the tokenizers differ at token"):
        sd.stage_difference(a.trace("the bank"), a.trace("the river"), "embedding")
