"""The Gemma 2, Gemma 3, OLMo 2 and SmolLM3 modules read config.json as transformers does:
the config class's default for every key a config leaves out, transformers 4's keys
(rope_local_base_freq, rope_scaling, sliding_window_pattern) and 5's (rope_parameters per
layer type, layer_types) alike, and gemma3's image-text config by its text_config."""
from __future__ import annotations

import pytest

from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.families import gemma2, gemma3, olmo2, smollm3

SIZES = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=12,
             num_attention_heads=4, num_key_value_heads=1, head_dim=16)


def read(module, **cfg):
    return module.config_from_hf(cfg, "config.json", set(), [])


def test_gemma2_defaults_are_gemma2_configs():
    config = read(gemma2, model_type="gemma2", **SIZES)
    assert (config.attn_softcap, config.final_softcap, config.query_scale) == (50.0, 30.0, 256.0)
    assert config.sliding_window == 4096 and config.local_layers == (0, 2, 4, 6, 8, 10)
    assert config.n_ctx == 8192 and config.tied_head and config.norm == "sandwich"
    assert config.activation == "gelu_tanh" and not config.mlp_bias and not config.qkv_bias
    off = read(gemma2, model_type="gemma2", sliding_window=None, attn_logit_softcapping=None,
               final_logit_softcapping=None, **SIZES)
    assert (off.sliding_window, off.local_layers, off.attn_softcap, off.final_softcap) == (0, (), 0.0, 0.0)


def test_gemma3_transformers4_keys():
    """As google/gemma-3-4b-it's text_config: rope_scaling linear x8 on the global layers,
    rope_local_base_freq on the local ones, the pattern of 6; everything else defaulted."""
    cfg = dict(model_type="gemma3", tie_word_embeddings=True,
               text_config=dict(model_type="gemma3_text", rope_scaling={"rope_type": "linear", "factor": 8.0},
                                sliding_window=1024, **SIZES))
    config = read(gemma3, **cfg)
    assert config.local_layers == (0, 1, 2, 3, 4, 6, 7, 8, 9, 10)
    assert (config.rope_theta, config.rope_local_theta, config.rope_scaling, config.rope_factor) == \
        (1e6, 1e4, "linear", 8.0)
    assert config.query_scale == 256.0 and config.qk_norm and not config.attn_softcap
    assert config.n_ctx == 131072 and config.sliding_window == 1024


def test_gemma3_transformers5_rope_parameters_equal_the_old_keys():
    old = read(gemma3, model_type="gemma3_text", rope_theta=5e5, rope_local_base_freq=2e4,
               sliding_window_pattern=3, **SIZES)
    new = read(gemma3, model_type="gemma3_text", layer_types=["sliding_attention", "sliding_attention",
                                                              "full_attention"] * 4,
               rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 5e5},
                                "sliding_attention": {"rope_type": "default", "rope_theta": 2e4}}, **SIZES)
    assert old == new and old.local_layers == (0, 1, 3, 4, 6, 7, 9, 10)


def test_gemma3_refuses_scaled_local_rope_in_one_line():
    with pytest.raises(ModelError, match=r"^config.json: scaled rope on the local layers is not supported"):
        read(gemma3, model_type="gemma3_text", **SIZES,
             rope_parameters={"full_attention": {"rope_type": "default"},
                              "sliding_attention": {"rope_type": "linear", "factor": 2.0}})


def test_olmo2_and_smollm3_defaults():
    olmo = read(olmo2, model_type="olmo2", **{**SIZES, "num_key_value_heads": None})
    assert olmo.n_kv_heads == 4 and olmo.ln_eps == 1e-5 and not olmo.tied_head and olmo.n_ctx == 2048
    smol = read(smollm3, model_type="smollm3", **SIZES)
    assert smol.nope_layers == (3, 7, 11) and smol.tied_head and smol.sliding_window == 0
    explicit = read(smollm3, model_type="smollm3", no_rope_layers=[1, 0] * 6, **SIZES)
    assert explicit.nope_layers == (1, 3, 5, 7, 9, 11)
    with pytest.raises(ModelError, match="no_rope_layers must list 12 values of 0 or 1"):
        read(smollm3, model_type="smollm3", no_rope_layers=[1, 2], **SIZES)
