"""Multi-head latent attention and DeepSeek-V2's routing (core/model/mla.py, core/model/moe.py,
io/families/deepseek_v2.py): the KV cache holds the latent and the rotated key part, not keys and
values; every head's k and v are that latent times W_kv_b; positions touch only the rotated tail
(neighbouring pairs, as complex numbers); group-limited top-k and the routed scaling factor as
transformers' router computes them; the config's ambiguous keys refused in one line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.model import moe, ops
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.families import deepseek_v2

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "deepseek_v2_tiny"
TEXT = "the bank of the river was steep and green"


@pytest.fixture(scope="module")
def model():
    return load_model(str(FIXTURE))


def test_the_cache_holds_the_latent_and_the_rotated_key_part(model):
    config = model.config
    trace = model.trace(TEXT)
    n, r, d_rope = trace.n_seq, config.kv_lora_rank, config.d_rotary
    for layer in range(config.n_layer):
        assert trace.kv_cache.keys[layer].shape == (1, n, r)              # not [n_head, n, d_head]
        assert trace.kv_cache.values[layer].shape == (1, n, d_rope)
        np.testing.assert_array_equal(trace.kv_cache.keys[layer][0], trace.layer("kv_latent", layer))
        np.testing.assert_array_equal(trace.kv_cache.values[layer][0], trace.layer("k_rope", layer))
    per_token = trace.kv_cache.nbytes() / (n * config.n_layer * 4)
    assert per_token == r + d_rope == 24                  # 16 + 8 numbers, vs 4·(24 + 16) = 160


def test_keys_and_values_are_the_latent_times_w_kv_b(model):
    config = model.config
    trace = model.trace(TEXT)
    d_nope = config.d_head - config.d_rotary
    for layer in range(config.n_layer):
        latent = trace.layer("kv_latent", layer).astype(np.float64)
        both = (latent @ model.params[f"h.{layer}.attn.kv_b.w"].astype(np.float64))
        both = both.reshape(trace.n_seq, config.n_head, d_nope + config.d_v).transpose(1, 0, 2)
        k, v = trace.layer("k", layer), trace.layer("v", layer)
        assert k.shape == (config.n_head, trace.n_seq, 24) and v.shape == (config.n_head, trace.n_seq, 16)
        np.testing.assert_allclose(k[..., :d_nope], both[..., :d_nope], atol=1e-5)
        np.testing.assert_allclose(v, both[..., d_nope:], atol=1e-5)
        for head in range(1, config.n_head):              # the position part: one for every head
            np.testing.assert_array_equal(k[head, :, d_nope:], k[0, :, d_nope:])
        np.testing.assert_array_equal(k[0, :, d_nope:], trace.layer("k_rope", layer))


def test_positions_turn_only_the_tail_as_complex_pairs(model):
    config = model.config
    trace = model.trace(TEXT)
    d_nope = config.d_head - config.d_rotary
    q, q0 = trace.layer("q", 1), trace.layer("q_unrotated", 1)
    np.testing.assert_array_equal(q[..., :d_nope], q0[..., :d_nope])
    assert not np.allclose(q[:, 1:, d_nope:], q0[:, 1:, d_nope:])          # position 0 is not turned
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 10)).astype(np.float32)
    angles = rng.uniform(-3, 3, (5, 3))
    turned = ops.rotate_tail_pairs(x, np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32))
    tail = x[..., 4:].astype(np.float64)
    expected = (tail[..., 0::2] + 1j * tail[..., 1::2]) * np.exp(1j * angles)
    np.testing.assert_array_equal(turned[..., :4], x[..., :4])
    np.testing.assert_allclose(turned[..., 4::2], expected.real, atol=1e-6)
    np.testing.assert_allclose(turned[..., 5::2], expected.imag, atol=1e-6)


def test_the_scale_has_yarn_mscale_squared(model):
    from transformer_stepper.core.model.forward import attention_scale

    config = model.config                      # factor 40, mscale_all_dim 0.707 (DeepSeek-V2-Lite's)
    mscale = 0.1 * 0.707 * np.log(40) + 1
    assert attention_scale(config) == np.float32(24 ** -0.5 * mscale * mscale)
    trace = model.trace(TEXT)
    raw, scores = trace.layer("scores_raw", 2), trace.layer("scores", 2)
    np.testing.assert_allclose(scores[:, -1], raw[:, -1] * np.float32(24 ** -0.5 * mscale ** 2), rtol=1e-6)


def test_group_limited_top_k_keeps_the_best_groups():
    # 4 experts in 2 groups: group {0, 1} (best 0.5) beats {2, 3} (best 0.3); with one group kept
    # the top 2 are experts 0 and 1, where plain greedy would take 0 and 2
    probs = np.array([[0.5, 0.01, 0.3, 0.19]], dtype=np.float32)
    masked = moe.group_limited(probs, 2, 1)
    np.testing.assert_array_equal(masked, np.array([[0.5, 0.01, 0.0, 0.0]], dtype=np.float32))
    ids, gates = moe.top_k(masked, 2, normalize=False, scale=2.0)
    assert ids.tolist() == [[0, 1]]
    np.testing.assert_array_equal(gates, np.array([[0.5, 0.01]], dtype=np.float32) * np.float32(2))


def test_routing_equals_transformers_router_grouped_and_scaled():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2TopkRouter

    hf_config = transformers.DeepseekV2Config(hidden_size=16, num_attention_heads=2, n_routed_experts=16,
                                              num_experts_per_tok=3,
                                              topk_method="group_limited_greedy", n_group=4, topk_group=2,
                                              routed_scaling_factor=2.5)
    router = DeepseekV2TopkRouter(hf_config)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        router.weight.copy_(torch.randn(16, 16, generator=gen))
        x = torch.randn(9, 16, generator=gen)
        _, hf_gates, hf_ids = router(x)
    cfg = {"vocab_size": 8, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
           "kv_lora_rank": 4, "qk_nope_head_dim": 4, "qk_rope_head_dim": 4, "v_head_dim": 4,
           "q_lora_rank": None, "n_routed_experts": 16, "num_experts_per_tok": 3,
           "moe_intermediate_size": 8, "topk_method": "group_limited_greedy", "n_group": 4,
           "topk_group": 2, "routed_scaling_factor": 2.5}
    config = deepseek_v2.config_from_hf(cfg, "m/config.json", set(), [])
    params = {"h.0.moe.router.w": router.weight.detach().numpy().T.copy()}
    _, _, ids, gates = moe.route(params, config, x.numpy(), 0)
    order = torch.argsort(hf_gates, dim=-1, descending=True)
    np.testing.assert_array_equal(ids, torch.gather(hf_ids, 1, order).numpy())
    np.testing.assert_allclose(gates, torch.gather(hf_gates, 1, order).numpy(), atol=1e-6)
    greedy = moe.top_k(moe.router_probs(x.numpy() @ params["h.0.moe.router.w"]), 3, False)[0]
    assert not np.array_equal(np.sort(greedy), np.sort(ids))      # the grouping changed a choice


SMALL = {"vocab_size": 8, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
         "num_experts_per_tok": 2, "n_routed_experts": 4, "q_lora_rank": None}


@pytest.mark.parametrize("change, message", [
    (dict(norm_topk_prob=True), "norm_topk_prob=true is not supported"),
    (dict(moe_layer_freq=2), "moe_layer_freq=2 is not supported"),
    (dict(topk_method="noaux_tc"), "topk_method='noaux_tc' is not supported"),
    (dict(scoring_func="sigmoid"), "scoring_func='sigmoid' is not supported"),
    (dict(num_key_value_heads=1), "num_key_value_heads=1 differs from num_attention_heads=2"),
    (dict(attention_bias=True), "attention_bias=true is not supported"),
])
def test_ambiguous_or_other_settings_are_refused_in_one_line(change, message):
    with pytest.raises(ModelError, match=message) as caught:
        deepseek_v2.config_from_hf({**SMALL, **change}, "m/config.json", set(), [])
    assert str(caught.value).startswith("m/config.json: ") and "\n" not in str(caught.value)


def test_v2_lite_fields_and_q_lora():
    lite = deepseek_v2.config_from_hf({**SMALL, "first_k_dense_replace": 1}, "m/config.json", set(), [])
    assert (lite.d_head, lite.d_v, lite.d_rotary, lite.kv_lora_rank, lite.q_lora_rank) == (192, 128, 64, 512, 0)
    assert lite.dense_layers == (0,) and lite.d_shared_expert == 2 * 1407 and not lite.shared_expert_gate
    full = deepseek_v2.config_from_hf({**SMALL, "q_lora_rank": 24}, "m/config.json", set(), [])
    from transformer_stepper.core.model.params import expected_shapes

    shapes = expected_shapes(full)
    assert shapes["h.0.attn.q_a.w"] == (16, 24) and shapes["h.0.attn.q_b.w"] == (24, 2 * 192)
    assert "h.0.attn.q.w" not in shapes and shapes["h.0.attn.kv_b.w"] == (512, 2 * (128 + 128))


def test_the_cache_note_says_the_cache_holds_latents(model):
    from transformer_stepper.ui.stages.notes import cache_note

    first = model.trace("the bank of the river")
    stepped = model.extend(first, [int(first.input_ids[1])])
    note = cache_note(stepped, per_head=True)
    assert "latent c_kv (16 numbers)" in note and "rotated k_rope (8)" in note and "rebuilt" in note


def test_provenance_of_keys_and_values_reads_the_cached_latent(model):
    from transformer_stepper.core.analysis.provenance.explain import explain

    trace = model.trace(TEXT)
    d_nope = model.config.d_head - model.config.d_rotary
    for name, c in (("v", 5), ("k", 3), ("q", 7), ("k_unrotated", d_nope + 2), ("q_unrotated", d_nope + 1)):
        found = explain(model, trace, name, (1, 2, 4, c))
        assert abs(found.value - found.traced) < 1e-5 and found.traced != 0, name
    v = explain(model, trace, "v", (1, 2, 4, 5))
    assert "c_kv" in v.operands and "kv_latent" in v.python
    namespace = {"trace": trace, "model": model}
    exec(v.python, namespace)                                     # the Python it gives recomputes it
    assert abs(namespace["value"] - v.traced) < 1e-5
    for name in ("k", "q"):                                       # the rotated tail is named, not expanded
        with pytest.raises(KeyError, match="rotated"):
            explain(model, trace, name, (1, 0, 4, d_nope + 1))
