"""A layer's detail keeps the attention weights and q, k, v as projected (per K/V head,
before the rotation) and derives the scores, the rotated q and k and the repeated k, v when
read (core/trace/layer_detail.py). Whatever is derived must be the bits the pass computes when it
records every array (a plain Recorder: the path every layer's detail took before), whole and
one head at a time, and a layer over the budget is kept per head within it."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import HeadTemperature, load_model
from transformer_stepper.core.model import forward
from transformer_stepper.core.trace.layer_detail import PER_HEAD
from transformer_stepper.core.trace.recorder import Recorder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEXT = "the bank of the river was steep and the water ran fast"
LAYER = 1
# the built-in model; GPT-2 (learned positions, Conv1D); BERT (post-LN encoder, no mask);
# Llama (GQA 4:2, rotary), Llama GQA 4:1; Gemma 2 (soft-capped, layer 1 global, sliding
# local layers); Gemma 3 (local rope base); Qwen3 (q/k norm, GQA); SmolLM3 (NoPE layers);
# Phi-4-mini (partial rotary, GQA); OLMo 2 (q/k norm over the projection)
FAMILIES = ["builtin", "gpt2_tiny_lm", "bert_tiny_mlm", "llama_tiny", "llama_tiny_gqa4", "gemma2_tiny",
            "gemma3_tiny", "qwen3_tiny", "smollm3_tiny", "phi4_mini_tiny", "olmo2_tiny"]


def _load(name):
    return load_model() if name == "builtin" else load_model(FIXTURES / name)


def reference(model, trace, layer, interventions=()):
    """name -> array: the layer's every intermediate, recorded by a Recorder that keeps them
    all (nothing derived, nothing computed in place, k and v repeated to every query head)."""
    config = model.config
    ctx = forward.context(config, trace.n_seq, interventions=tuple(interventions))
    recorder = Recorder()
    with np.errstate(all="ignore"):
        forward.block(model.params, config, trace.residual["layer_in"][layer], ctx, layer, recorder)
    return {name: values[0] for name, values in recorder.per_layer.items()}


def assert_same_bits(actual, expected, what):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
    assert actual.tobytes() == expected.tobytes(), f"{what}: not the same bits"


def assert_layer_matches(trace, ref, layer):
    assert tuple(trace.detail(layer)) == tuple(ref)          # every name, in the pass's order
    for name, expected in ref.items():
        assert_same_bits(trace.layer(name, layer), expected, f"{name} (whole layer)")
        if name in PER_HEAD:
            for head in range(trace.config.n_head):
                assert_same_bits(trace.head_array(name, layer, head), expected[head], f"{name} head {head}")


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    return _load(request.param)


def test_derived_arrays_are_the_pass_bits_recorded_and_computed(model):
    recorded = model.trace(TEXT, detail_layers=(LAYER,))               # recorded by the pass
    computed = model.trace(TEXT, detail_budget=0)                      # computed when read
    assert not computed.cache.has(LAYER)
    for trace in (recorded, computed):
        ref = reference(model, trace, LAYER)
        assert_layer_matches(trace, ref, LAYER)
        assert_same_bits(trace["scores"][LAYER], ref["scores"], "stacked scores")
    for layer in range(model.config.n_layer):          # local and global, rope and NoPE layers
        assert_layer_matches(computed, reference(model, computed, layer), layer)


def test_detail_keeps_one_n_squared_array_and_kv_per_kv_head(model):
    config = model.config
    trace = model.trace(TEXT, detail_layers=(LAYER,))
    kept = trace.detail(LAYER).kept
    n = trace.n_seq
    squares = [name for name, value in kept.items() if value.shape[-2:] == (n, n)]
    assert squares == ["attn_weights"]
    assert not {"scores_raw", "scores", "scores_uncapped"} & set(kept)
    for name in ("k", "v", "k_unrotated"):
        if name in kept:
            assert kept[name].shape[0] == config.n_kv_heads, name
    if config.position == "rotary":
        assert "q" not in kept and "k" not in kept
        assert kept["k_unrotated"].shape == (config.n_kv_heads, n, config.d_head)


def test_llama_detail_is_smaller_than_every_array(model):
    """What the derived names would cost kept (the old detail) against what is kept."""
    trace = model.trace(TEXT, detail_layers=(LAYER,))
    ref = reference(model, trace, LAYER)
    whole = sum({id(v): v.nbytes for v in ref.values()}.values())
    kept = trace.detail(LAYER).nbytes()
    n_squares = len([v for v in ref.values() if v.shape[-2:] == (trace.n_seq, trace.n_seq)])
    square = model.config.n_head * trace.n_seq ** 2 * 4
    assert kept <= whole - (n_squares - 1) * square


def test_tempered_heads_per_head_weights_match(fixtures_dir):
    model = _load("gemma2_tiny")
    tempered = [HeadTemperature(layer=LAYER, head=2, temperature=0.5)]
    trace = model.trace(TEXT, interventions=tempered, detail_budget=0)
    ref = reference(model, trace, LAYER, tempered)
    detail = trace.detail(LAYER)
    assert detail.per_head                     # over a budget of 0: kept per head
    for head in range(model.config.n_head):
        assert_same_bits(trace.head_array("attn_weights", LAYER, head), ref["attn_weights"][head], f"head {head}")
    assert_same_bits(trace.layer("attn_weights", LAYER), ref["attn_weights"], "whole")


@pytest.mark.parametrize("name", ["llama_tiny", "gpt2_tiny_lm", "gemma2_tiny"])
def test_a_layer_over_the_budget_is_kept_per_head_within_it(name):
    model = _load(name)
    n_seq = len(model.encode(TEXT).input_ids)
    whole = model.trace(TEXT, detail_layers=(LAYER,)).detail(LAYER).nbytes()
    weights = model.config.n_head * n_seq * n_seq * 4
    budget = whole - weights // 2              # the whole layer is over it, per head it fits
    trace = model.trace(TEXT, detail_budget=budget)
    ref = reference(model, trace, LAYER)
    for head in range(model.config.n_head):
        for array in ("attn_weights", "scores", "scores_raw", "q", "k", "v"):
            assert_same_bits(trace.head_array(array, LAYER, head), ref[array][head], f"{array} head {head}")
            assert trace.cache.nbytes() <= budget
    assert trace.cache.per_head() == [LAYER] and trace.cache.oversized() is None
    assert_layer_matches(trace, ref, LAYER)
    assert trace.cache.nbytes() <= budget
    trace.detail(0)                            # another layer: the per-head one goes, within the budget
    assert trace.cache.nbytes() <= budget
    recorded = model.trace(TEXT, detail_budget=budget, detail_layers=(LAYER,))   # by the pass
    assert recorded.cache.per_head() == [LAYER] and recorded.cache.computed == 0
    assert recorded.cache.nbytes() <= budget
    assert_layer_matches(recorded, ref, LAYER)


def test_a_head_of_a_derived_array_is_computed_for_that_head_only(monkeypatch):
    model = _load("llama_tiny")
    trace = model.trace(TEXT, detail_layers=(LAYER,))
    shapes = []
    real = forward.dot_products
    monkeypatch.setattr(forward, "dot_products", lambda q, k: shapes.append(q.shape) or real(q, k))
    trace.head_array("scores", LAYER, 3)
    assert shapes == [(1, trace.n_seq, model.config.d_head)]


def test_minilm_derived_arrays_are_the_pass_bits(minilm_dir):
    model = load_model(minilm_dir)
    trace = model.trace(TEXT, detail_budget=0)
    assert_layer_matches(trace, reference(model, trace, 2), 2)


@pytest.mark.parametrize("budget", [0, 1 << 30])
def test_every_heads_row_is_the_whole_layers_row(budget):
    model = _load("qwen3_tiny")
    trace = model.trace(TEXT, detail_budget=budget)
    ref = reference(model, trace, LAYER)
    for name in ("attn_weights", "scores", "k"):
        assert_same_bits(trace.head_rows(name, LAYER, 4), ref[name][:, 4], name)


@pytest.mark.parametrize("block", [3 * 11, 1 << 18])   # blocks that straddle heads, one for all
def test_one_heads_softmax_is_its_rows_of_the_whole_layers(monkeypatch, block):
    from transformer_stepper.core.model import ops

    monkeypatch.setattr(ops, "_SOFTMAX_BLOCK", block)
    x = np.random.default_rng(0).normal(size=(5, 7, 11)).astype(np.float32) * 4
    x[:, :, 9] = -np.inf
    whole = ops.softmax(x)
    for head in range(5):
        assert_same_bits(ops.softmax_rows_of(x[head], head * 7, 5 * 7), whole[head], f"head {head}")
