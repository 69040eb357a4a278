"""One stage, one function: the function core/model/stages.py names for a stage, called on the
trace's own inputs, gives the trace's arrays bit for bit. So the stage list, the views,
provenance's "Copy as Python" and docs/architecture.md point at the code the forward pass runs."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.model import forward, layer_context, stages
from transformer_stepper.core.model.forward import _noop

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEXT = "the bank of the river was steep"
LAYER = 1
# rotary + GQA + untied head; learned positions + biases + Conv1D; post-LN encoder with types
# Gemma 2 (layer 1 global, soft-capped), Gemma 3 (layer 1 local, own rope base), OLMo 2;
# fused qkv, longrope, partial rotary, GQA, tied (Phi-4-mini); parallel residual (Pythia)
FAMILIES = ["llama_tiny", "gpt2_tiny_lm", "bert_tiny_mlm", "qwen3_tiny", "builtin", "gemma2_tiny",
            "gemma3_tiny", "olmo2_tiny", "phi4_mini_tiny", "pythia_tiny"]


@pytest.fixture(scope="module", params=FAMILIES)
def model_and_trace(request):
    model = load_model() if request.param == "builtin" else load_model(FIXTURES / request.param)
    return model, model.trace(TEXT, detail_layers=(LAYER,))


def test_every_stage_names_a_core_function():
    for stage in stages.STAGES:
        function = stage.compute_function()
        assert callable(function), stage.key
        assert function.__module__.startswith("transformer_stepper.core."), stage.key
        assert f"Stage {stage.number}." in _source_of(function) or stage.key in ("tokenize", "logit_lens"), \
            f"{stage.function} does not say which stage it computes"


def _source_of(function) -> str:
    import inspect
    return inspect.getsource(function)


def _repeated(config, kv):
    return np.repeat(kv, config.group_size, axis=0)


def test_attention_stage_functions_reproduce_the_trace(model_and_trace):
    model, trace = model_and_trace
    config, params = model.config, model.params
    ctx = layer_context.context(config, trace.n_seq)
    q, k, v = stages.stage("qkv").compute_function()(params, config, trace.layer("attn_in", LAYER), LAYER, ctx)
    np.testing.assert_array_equal(q, trace.layer("q", LAYER))
    np.testing.assert_array_equal(_repeated(config, k), trace.layer("k", LAYER))
    np.testing.assert_array_equal(_repeated(config, v), trace.layer("v", LAYER))
    scores = stages.stage("scores").compute_function()(
        trace.layer("q", LAYER), trace.layer("k", LAYER), forward.attention_scale(config),
        layer_context.layer_context(config, ctx, LAYER).mask, config.attn_softcap)
    np.testing.assert_array_equal(scores, trace.layer("scores", LAYER))
    weights = stages.stage("softmax").compute_function()(trace.layer("scores", LAYER))
    np.testing.assert_array_equal(weights, trace.layer("attn_weights", LAYER))
    head_outputs = stages.stage("weighted_sum").compute_function()(
        trace.layer("attn_weights", LAYER), trace.layer("v", LAYER))
    np.testing.assert_array_equal(head_outputs, trace.layer("head_outputs", LAYER))
    attn_out = stages.stage("output_projection").compute_function()(
        params, config, trace.layer("heads_concat", LAYER), LAYER)
    np.testing.assert_array_equal(attn_out, trace.layer("attn_out", LAYER))


def test_embedding_and_block_stage_functions_reproduce_the_trace(model_and_trace):
    model, trace = model_and_trace
    config, params = model.config, model.params
    np.testing.assert_array_equal(stages.stage("embedding").compute_function()(params, trace.input_ids),
                                  trace["token_embeddings"])
    if "position_embeddings" in trace:
        np.testing.assert_array_equal(
            stages.stage("position_encoding").compute_function()(config, params, trace.n_seq),
            trace["position_embeddings"])
    embedded = stages.stage("position_addition").compute_function()(
        params, config, trace.input_ids, trace["token_type_ids"], _noop)
    np.testing.assert_array_equal(embedded, trace["embedding_output"])
    mlp_out = stages.stage("feed_forward").compute_function()(
        params, config, trace.layer("mlp_in", LAYER), LAYER, _noop)
    np.testing.assert_array_equal(mlp_out, trace.layer("mlp_out", LAYER))
    ctx = layer_context.context(config, trace.n_seq)
    layer_out = stages.stage("layer_output").compute_function()(
        params, config, trace.layer("layer_in", LAYER), ctx, LAYER, _noop)
    np.testing.assert_array_equal(layer_out, trace.layer("layer_out", LAYER))
    if config.lm_head:
        final = trace.hidden_states[-1]
        logits = stages.stage("prediction").compute_function()(params, config, final, _noop)
        np.testing.assert_allclose(logits, trace.logits, rtol=0, atol=0)
