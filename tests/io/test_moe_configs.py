"""The mixture-of-experts families' config.json reading (io/families/mixtral.py, qwen3_moe.py,
qwen2_moe.py, olmoe.py): transformers' defaults, dense layers as transformers decides them, both
spellings of the experts' count, and one-line refusals."""
from __future__ import annotations

import pytest

from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.families import gpt_oss, mixtral, olmoe, qwen2_moe, qwen3_moe

SMALL = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2)


def read(module, **cfg):
    return module.config_from_hf({**SMALL, **cfg}, "m/config.json", set(), [])


def test_defaults_follow_transformers():
    m = read(mixtral)
    assert (m.family, m.n_expert, m.n_expert_used, m.norm_topk, m.d_expert_ff) == ("mixtral", 8, 2, True, 64)
    assert m.rope_theta == 1e6 and m.sliding_window == 0 and m.ln_eps == 1e-5
    q3 = read(qwen3_moe, head_dim=8)
    assert (q3.n_expert, q3.n_expert_used, q3.norm_topk, q3.d_expert_ff, q3.dense_layers) == (128, 8, False, 768, ())
    assert q3.qk_norm and q3.qk_norm_over == "head"
    q2 = read(qwen2_moe)
    assert (q2.n_expert, q2.n_expert_used, q2.d_shared_expert, q2.qkv_bias, q2.o_bias) == (60, 4, 5632, True, False)
    ol = read(olmoe, num_key_value_heads=None)
    assert (ol.n_expert, ol.n_expert_used, ol.qk_norm_over, ol.n_kv_heads) == (64, 8, "projection", 4)


def test_dense_layers_as_transformers_decides():
    assert read(qwen3_moe, head_dim=8, mlp_only_layers=[0, 3]).dense_layers == (0, 3)
    # (layer + 1) % decoder_sparse_step != 0: every other layer dense with step 2
    assert read(qwen2_moe, decoder_sparse_step=2).dense_layers == (0, 2)
    assert read(qwen2_moe, decoder_sparse_step=2, mlp_only_layers=[1]).dense_layers == (0, 1, 2)


def test_both_spellings_of_the_expert_count():
    assert read(qwen3_moe, head_dim=8, num_local_experts=16).n_expert == 16      # transformers 5's save
    assert read(mixtral, num_experts=4).n_expert == 4
    with pytest.raises(ModelError, match="m/config.json: num_experts=16 and num_local_experts=8 disagree"):
        read(qwen3_moe, head_dim=8, num_experts=16, num_local_experts=8)


@pytest.mark.parametrize("module, cfg, message", [
    (mixtral, dict(num_local_experts=2, num_experts_per_tok=3), "num_experts_per_tok=3 is more than"),
    (qwen3_moe, dict(head_dim=8, mlp_only_layers=[9]), "mlp_only_layers must list layer indices below 4"),
    (qwen3_moe, dict(head_dim=8, use_sliding_window=True), "use_sliding_window=true"),
    (olmoe, dict(clip_qkv=8.0), "clip_qkv=8.0"),
    (qwen2_moe, dict(num_experts=0), "num_experts must be a positive integer"),
])
def test_refusals_are_one_line_naming_the_file(module, cfg, message):
    with pytest.raises(ModelError, match=message) as caught:
        read(module, **cfg)
    assert str(caught.value).startswith("m/config.json: ") and "\n" not in str(caught.value)


@pytest.mark.parametrize("model_type, reason", [("deepseek_v3", "noaux_tc")])
def test_moe_families_not_computed_are_refused_saying_why(model_type, reason):
    from transformer_stepper.io.families import by_model_type

    with pytest.raises(ModelError, match=f"m/config.json: model_type='{model_type}': .*{reason}"):
        by_model_type(model_type, "m/config.json")


def test_gpt_oss_defaults_follow_transformers():
    """GptOssConfig: no rope_scaling means its YaRN (untruncated), the window 128 on the even
    layers, biases, the router's order, the clamped SwiGLU's alpha and limit."""
    g = read(gpt_oss, head_dim=8)
    assert (g.family, g.n_expert, g.n_expert_used, g.router_order, g.router_bias) == ("gpt_oss", 128, 4,
                                                                                      "topk_softmax", True)
    assert (g.sliding_window, g.local_layers) == (128, (0, 2))
    assert (g.rope_scaling, g.rope_factor, g.rope_original_n_ctx, g.rope_truncate, g.rope_theta) == \
        ("yarn", 32.0, 4096, False, 150000.0)
    assert g.qkv_bias and g.o_bias and g.mlp_bias and g.attn_sinks and g.clamped_swiglu
    assert (g.swiglu_alpha, g.swiglu_limit, g.ln_eps) == (1.702, 7.0, 1e-5)
    assert read(gpt_oss, head_dim=8, sliding_window=None).local_layers == ()
    assert read(gpt_oss, head_dim=8, layer_types=["full_attention"] * 3 + ["sliding_attention"]).local_layers == (3,)
    assert read(gpt_oss, head_dim=8, num_experts=32).n_expert == 32


def test_a_gpt_oss_folder_with_mxfp4_experts_is_refused_naming_them():
    names = {"model.layers.0.mlp.experts.gate_up_proj_blocks", "model.layers.0.mlp.experts.gate_up_proj_scales"}
    with pytest.raises(ModelError, match="m/config.json: the experts are stored in MXFP4 .*open the model's GGUF"):
        gpt_oss.config_from_hf({**SMALL, "head_dim": 8}, "m/config.json", names, [])
