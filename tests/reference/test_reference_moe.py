"""Mixture-of-experts families (tests/make_moe_fixtures.py): hidden states, attentions and logits
within 1e-4 of Hugging Face; every token's chosen experts and gate weights equal the router's
(output_router_logits and a hook on the router); greedy generation and the KV cache's
extension equal; each family's MoE branch (norm_topk, dense layers, the shared expert) is
needed to match."""
from __future__ import annotations

import numpy as np
import pytest

from reference_helpers import ATOL, HF_OUTPUTS, assert_trace_matches, load_reference, reference_texts
from test_reference_generation import prompt_trace
from transformer_stepper import load_model
from transformer_stepper.core.trace.generate import generate
from transformer_stepper.core.trace.model import Model

pytestmark = pytest.mark.reference
MOE = ("mixtral_tiny", "qwen3_moe_tiny", "qwen2_moe_tiny", "olmoe_tiny", "gpt_oss_tiny", "deepseek_v2_tiny")


@pytest.mark.parametrize("name", MOE)
def test_outputs_and_routing_equal_hugging_face(name, fixtures_dir):
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    model = load_model(fixtures_dir / name)
    assert model.config.is_moe
    moe_layers = [int(i) for i in reference["moe_layers"]]
    assert [i for i in range(model.config.n_layer) if model.config.is_moe_layer(i)] == moe_layers
    for t, text in enumerate(reference_texts(reference)):
        trace = model.trace(text)
        assert_trace_matches(trace, reference, t, f"{name} text {t}")
        for position, layer in enumerate(moe_layers):
            np.testing.assert_allclose(trace.layer("router_logits", layer), reference[f"router_logits_{t}"][position],
                                       atol=ATOL, rtol=0)
            np.testing.assert_array_equal(trace.layer("expert_ids", layer), reference[f"expert_ids_{t}"][position])
            np.testing.assert_allclose(trace.layer("expert_gates", layer), reference[f"expert_gates_{t}"][position],
                                       atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", MOE)
def test_greedy_generation_and_kv_cache_equal(name, fixtures_dir):
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    model = load_model(fixtures_dir / name)
    prompt, expected = reference["input_ids_0"], reference["generated_ids_0"]
    steps = generate(model, prompt_trace(model, prompt), 20)
    np.testing.assert_array_equal(steps[-1].input_ids, expected)
    grown = prompt_trace(model, expected[:4])
    for token in expected[4:12]:
        grown = model.extend(grown, [int(token)])
    whole = prompt_trace(model, expected[:12])
    np.testing.assert_allclose(grown.hidden_states, whole.hidden_states, atol=ATOL)
    np.testing.assert_allclose(grown.logits, whole.logits, atol=ATOL)
    for layer in range(model.config.n_layer):      # the lazily recomputed detail, block by block
        np.testing.assert_allclose(grown.layer("mlp_out", layer), whole.layer("mlp_out", layer), atol=ATOL)
        if not model.config.is_moe_layer(layer):
            assert grown.layer("router_logits", layer).shape == grown.layer("expert_ids", layer).shape == (12, 0)
            continue
        for name_ in ("router_logits", "expert_gates", "expert_outputs"):
            np.testing.assert_allclose(grown.layer(name_, layer), whole.layer(name_, layer), atol=ATOL)
        np.testing.assert_array_equal(grown.layer("expert_ids", layer), whole.layer("expert_ids", layer))


def _departs(model, changes: dict, name: str) -> bool:
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    changed = Model(model.config.replace(**changes), model.params, model.tokenizer, model.source)
    trace = changed.trace(reference_texts(reference)[2])
    return not np.allclose(trace.logits, reference["logits_2"], atol=ATOL)


def test_each_family_needs_its_branches(fixtures_dir):
    mixtral = load_model(fixtures_dir / "mixtral_tiny")
    assert (mixtral.config.n_expert, mixtral.config.n_expert_used, mixtral.config.norm_topk) == (8, 2, True)
    assert _departs(mixtral, {"norm_topk": False}, "mixtral_tiny")
    qwen3 = load_model(fixtures_dir / "qwen3_moe_tiny")
    assert qwen3.config.dense_layers == (1,) and qwen3.config.qk_norm and qwen3.config.norm_topk
    assert "h.1.mlp.gate.w" in qwen3.params and "h.1.moe.router.w" not in qwen3.params
    assert _departs(qwen3, {"norm_topk": False}, "qwen3_moe_tiny")
    qwen2 = load_model(fixtures_dir / "qwen2_moe_tiny")
    assert qwen2.config.d_shared_expert == 48 and not qwen2.config.norm_topk and qwen2.config.qkv_bias
    olmoe = load_model(fixtures_dir / "olmoe_tiny")
    assert olmoe.config.qk_norm_over == "projection" and not olmoe.config.norm_topk
    assert _departs(olmoe, {"norm_topk": True}, "olmoe_tiny")


def test_the_shared_expert_and_its_gate_are_needed(fixtures_dir):
    """Qwen2-MoE without its shared expert's contribution departs from HF; the recorded
    output is the routed experts' weighted sum plus sigmoid(gate) times the shared expert."""
    model = load_model(fixtures_dir / "qwen2_moe_tiny")
    trace = model.trace(reference_texts(load_reference(HF_OUTPUTS / "qwen2_moe_tiny.npz"))[2])
    gate = trace.layer("shared_expert_gate", 0)
    assert gate.shape == (trace.n_seq, 1) and ((gate > 0) & (gate < 1)).all()
    routed = sum(trace.layer("expert_gates", 0)[:, s, None] * trace.layer("expert_outputs", 0)[s]
                 for s in range(model.config.n_expert_used))
    shared = gate * trace.layer("shared_expert_out", 0)
    np.testing.assert_allclose(trace.layer("mlp_out", 0), routed + shared, atol=1e-5)
    assert np.abs(shared).max() > 0.1                # not a negligible term


@pytest.mark.parametrize("name", MOE)
def test_expert_interventions_equal_a_hugging_face_router_hook(name, fixtures_dir):
    """Disabling an expert, and sending a token to an expert, equal transformers with a forward
    hook on that layer's router doing the same (tests/make_moe_fixtures.py); the intervened
    trace from that layer on equals a whole intervened pass."""
    from transformer_stepper import DisableExpert, ForceExpert

    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    model = load_model(fixtures_dir / name)
    layer, moe_layers = int(reference["edit_layer"]), [int(i) for i in reference["moe_layers"]]
    clean = model.trace(str(reference["text_0"]))
    edits = {"disabled": DisableExpert(layer, int(reference["disabled_expert"])),
             "forced": ForceExpert(layer, int(reference["forced_token"]), int(reference["forced_expert"]))}
    for prefix, edit in edits.items():
        trace = model.intervene(clean, [edit])
        np.testing.assert_allclose(trace.hidden_states, reference[f"{prefix}_hidden_states_0"], atol=ATOL, rtol=0)
        np.testing.assert_allclose(trace.logits, reference[f"{prefix}_logits_0"], atol=ATOL, rtol=0)
        for position, moe_layer in enumerate(moe_layers):
            np.testing.assert_array_equal(trace.layer("expert_ids", moe_layer),
                                          reference[f"{prefix}_expert_ids_0"][position])
        changed = np.abs(trace.layer("mlp_out", layer) - clean.layer("mlp_out", layer)).max()
        assert changed > 1e-3                         # it changed something (float noise: ~1e-6)
        whole = model.trace(str(reference["text_0"]), interventions=[edit])
        np.testing.assert_allclose(whole.logits, trace.logits, atol=1e-5)
    ids = model.intervene(clean, [edits["disabled"]]).layer("expert_ids", layer)
    assert int(reference["disabled_expert"]) not in ids
    forced = model.intervene(clean, [edits["forced"]]).layer("expert_ids", layer)
    assert int(reference["forced_expert"]) in forced[int(reference["forced_token"])]


@pytest.mark.parametrize("name, family", [("mixtral_tiny", "Mixtral"), ("qwen2_moe_tiny", "Qwen2-MoE"),
                                          ("qwen3_moe_tiny", "Qwen3-MoE"), ("gpt_oss_tiny", "gpt-oss")])
def test_a_lone_moe_file_without_config_is_refused_naming_it(name, family, fixtures_dir, tmp_path):
    import shutil

    from transformer_stepper.core.model.errors import ModelError

    lone = tmp_path / f"{name}.safetensors"
    shutil.copy(fixtures_dir / name / "model.safetensors", lone)
    with pytest.raises(ModelError, match=f"{lone}: a {family}.* checkpoint without its config.json"):
        load_model(lone)
