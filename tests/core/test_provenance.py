"""Provenance: every explained value is recomputed from its operands to the trace's own value,
its terms add up to what they claim, and its "copy as Python" snippet gives the same number —
for random cells of every explainable array, on every family's fixture and the built-in model,
clean and intervened."""
import numpy as np
import pytest

from tests.conftest import FIXTURES
from transformer_stepper import AblateHead, HeadTemperature, NoPositions, ShufflePositions, SwapEmbedding, load_model
from transformer_stepper.core.analysis.provenance.explain import (
    KINDS,
    explain,
    explainable,
    resolve)

TEXT = "the queen rode to the bank of the river"
FAMILIES = [None, "llama_tiny_gqa4", "qwen3_tiny", "gemma_tiny", "mistral_tiny", "gpt2_tiny_lm",
            "bert_tiny_mlm", "roberta_tiny", "distilbert_tiny", "gemma2_tiny", "gemma3_tiny", "olmo2_tiny",
            "smollm3_tiny", "phi3_tiny", "phi35_tiny",
            "phi4_mini_tiny", "pythia_tiny", "neox_tiny_sequential", "llama_tiny_yarn",
            "llama_tiny_dynamic", "gpt_oss_tiny"]
_models: dict = {}


def model_for(name):
    if name not in _models:
        _models[name] = load_model(None if name is None else FIXTURES / name)
    return _models[name]


def run_snippet(explanation, model, trace) -> float:
    scope = {"model": model, "trace": trace}
    exec(explanation.python, scope)
    return float(scope["value"])


def check(explanation, model, trace) -> None:
    where = f"{explanation.name}{explanation.index}"
    assert np.isclose(explanation.value, explanation.traced, rtol=1e-5, atol=1e-5), where
    assert np.isclose(run_snippet(explanation, model, trace), explanation.traced, rtol=1e-5, atol=1e-5), where
    if explanation.terms:
        assert np.isclose(sum(t.value for t in explanation.terms) + explanation.rest,
                          explanation.terms_total, rtol=1e-9, atol=1e-9), where
        sizes = [abs(t.value) for t in explanation.terms]
        if explanation.terms_label not in ("sum", "Σ gate · expert"):   # a sum's parts keep the formula's
            # order (an MoE output's: the chosen experts, largest gate first)
            assert sizes == sorted(sizes, reverse=True), where
    assert explanation.steps[-1].value == explanation.value, where
    for source in explanation.sources:
        check(source, model, trace)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f or "builtin")
def test_random_cells_of_every_array_recompute_to_the_traced_value(family):
    model = model_for(family)
    trace = model.trace(TEXT)
    rng = np.random.default_rng(7)
    names = explainable(trace)
    first_norm = "post_attn_ln_out" if model.config.norm == "branch_out" else "ln_1_out"   # OLMo 2
    feed_forward = {"router_logits", "expert_gates", "mlp_out"} if model.config.is_moe else {"mlp_act"}
    assert {"scores", "attn_weights", "head_outputs", "q", "k", "v", first_norm} | feed_forward <= set(names)
    if model.config.attn_sinks:
        assert "sink_weights" in names
    if model.config.norms_branch_output:
        assert {"post_attn_ln_out", "post_mlp_ln_normalized"} <= set(names)
    if model.config.attn_softcap:
        assert "scores_uncapped" in names
    if model.config.lm_head:
        assert "logits" in names
    for name in names:
        shape = trace[name].shape
        for _ in range(3):
            index = tuple(int(rng.integers(n)) for n in shape)
            check(explain(model, trace, name, index), model, trace)


@pytest.mark.parametrize("interventions", [
    [AblateHead(0, 1)], [AblateHead(1, 0, "mean")], [HeadTemperature(0, 2, 3.0)], [NoPositions()],
    [ShufflePositions(3)], [SwapEmbedding(2, 5)]], ids=lambda i: type(i[0]).__name__ + getattr(i[0], "mode", ""))
@pytest.mark.parametrize("family", [None, "llama_tiny_gqa4", "gpt_oss_tiny"], ids=lambda f: f or "builtin")
def test_intervened_traces_are_explained_with_their_intervention(family, interventions):
    model = model_for(family)
    trace = model.trace(TEXT, interventions=interventions)
    rng = np.random.default_rng(1)
    for name in ("scores", "attn_weights", "sink_weights", "head_outputs", "q", "k", "token_embeddings",
                 "position_embeddings", "logits"):
        if name not in trace:
            continue
        shape = trace[name].shape
        for _ in range(4):
            index = tuple(int(rng.integers(n)) for n in shape)
            check(explain(model, trace, name, index), model, trace)
    item = interventions[0]
    if isinstance(item, AblateHead):
        e = explain(model, trace, "head_outputs", (item.layer, item.head, 2, 1))
        assert "ablated" in e.steps[-1].label
        # the un-ablated sum is still shown: the terms are the weights times the values
        assert e.terms_total != e.value or item.mode == "mean"


def test_a_score_decomposes_into_the_products_of_q_and_k():
    model = model_for("llama_tiny_gqa4")             # rotary, GQA 4:1, head_dim 16
    trace = model.trace(TEXT)
    layer, head, i, j = 1, 3, 5, 2
    e = explain(model, trace, "scores", (layer, head, i, j))
    q, k = trace.layer("q", layer)[head, i], trace.layer("k", layer)[head, j]
    products = q.astype(np.float64) * k
    assert e.n_terms == model.config.d_head
    assert e.terms[0].value == pytest.approx(products[np.argmax(np.abs(products))])
    assert e.terms_total == pytest.approx(q @ k, rel=1e-6)
    assert any("rotary" in note for note in e.notes) and any("K/V head 0" in note for note in e.notes)
    # a key after the query is masked: −∞ recomputed, and said so
    masked = explain(model, trace, "scores", (0, 0, 1, 4))
    assert np.isneginf(masked.value) and np.isneginf(masked.traced) and "−∞" in masked.steps[-1].label
    weight = explain(model, trace, "attn_weights", (0, 0, 1, 4))
    assert weight.value == 0.0 == weight.traced


def test_rotated_q_is_its_pair_turned_by_the_position_angle():
    model = model_for("qwen3_tiny")                  # q_norm before the rotation
    trace = model.trace(TEXT)
    e = explain(model, trace, "q", (0, 1, 4, 3))
    labels = " ".join(s.label for s in e.steps)
    assert "RMS" in labels and "θ" in labels and "rotated" in labels
    unrotated = explain(model, trace, "q_unrotated", (0, 1, 4, 3))
    assert "θ" not in " ".join(s.label for s in unrotated.steps)
    assert unrotated.traced == pytest.approx(float(trace.layer("q_unrotated", 0)[1, 4, 3]))


def test_head_output_terms_are_one_per_source_token():
    model = model_for(None)
    trace = model.trace(TEXT)
    e = explain(model, trace, "head_outputs", (1, 1, 6, 0))
    assert e.n_terms == trace.n_seq
    weights = trace.layer("attn_weights", 1)[1, 6]
    assert {t.factors[0] for t in e.terms} <= {float(w) for w in weights}


def test_aliases_resolve_to_the_array_that_computed_them():
    model = model_for("gpt2_tiny_lm")                 # pre-LN, final ln_f
    trace = model.trace(TEXT)
    assert resolve(trace, "layer_out", (0, 1, 2)) == ("mlp_residual", (0, 1, 2))
    assert resolve(trace, "hidden_states", (model.config.n_layer, 1, 2)) == ("final_ln_out", (1, 2))
    assert resolve(trace, "hidden_states", (0, 1, 2)) == ("embedding_sum", (1, 2))
    bert = model_for("bert_tiny_mlm")                 # post-LN, embedding LayerNorm
    bert_trace = bert.trace(TEXT)
    assert resolve(bert_trace, "layer_out", (0, 1, 2)) == ("ln_2_out", (0, 1, 2))
    assert resolve(bert_trace, "attn_in", (1, 1, 2)) == ("ln_2_out", (0, 1, 2))
    e = explain(bert, bert_trace, "hidden_states", (0, 1, 2))
    assert e.name == "embedding_output" and "LayerNorm" in e.title
    assert e.traced == pytest.approx(float(bert_trace.hidden_states[0, 1, 2]))


def test_bad_addresses_are_one_clear_error():
    model = model_for(None)
    trace = model.trace(TEXT)
    with pytest.raises(IndexError, match="layer 9"):
        explain(model, trace, "scores", (9, 0, 0, 0))
    with pytest.raises(IndexError, match="outside the shape"):
        explain(model, trace, "scores", (0, 0, 0, 99))
    with pytest.raises(KeyError):
        explain(model, trace, "no_such_array", (0,))
    assert set(KINDS) >= {"scores", "attn_weights", "head_outputs", "q", "k", "v", "mlp_act", "logits"}


def test_a_weight_and_the_sinks_share_name_the_sink():
    """gpt-oss: the head's sink logit is in the weight's denominator, and the sink's own share is
    explained; a gate is the softmax of the chosen logits; a router logit has its bias."""
    model = model_for("gpt_oss_tiny")
    trace = model.trace(TEXT)
    weight = explain(model, trace, "attn_weights", (1, 2, 5, 3))
    assert any("sink" in s.label for s in weight.steps) and "sink_h" in weight.formula
    assert any("the sink took" in note for note in weight.notes)
    share = explain(model, trace, "sink_weights", (1, 2, 5, 0))
    row = trace.layer("attn_weights", 1)[2, 5]
    assert share.value == pytest.approx(1.0 - float(row.sum()), abs=1e-6)
    gate = explain(model, trace, "expert_gates", (0, 4, 1))
    assert gate.formula == "gate = softmax(top-k logits)[choice]"
    logit = explain(model, trace, "router_logits", (0, 4, 9))
    assert logit.steps[-1].label.startswith("+ b[9]")
