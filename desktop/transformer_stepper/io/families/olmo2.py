"""OLMo 2 (`olmo2`): Llama's projections, SwiGLU and rotary, with the block norms moved to the
branch outputs (x + post_attention_layernorm(attention(x)), x + post_feedforward_layernorm(
mlp(x)); no norm before either branch: config norm "branch_out") and RMSNorm of the whole q
and k projections (q_norm [n_head·d_head], k_norm [n_kv_head·d_head]) before the heads are
split and rotated. Untied lm_head.

Keys read and transformers' Olmo2Config defaults used when absent: vocab_size 50304,
hidden_size 4096, intermediate_size 11008, num_hidden_layers 32, num_attention_heads 32,
num_key_value_heads = num_attention_heads, hidden_act silu, max_position_embeddings 2048,
rms_norm_eps 1e-5, tie_word_embeddings false, rope_theta 10000 with rope_scaling (or
rope_parameters), attention_bias false (q/k/v/o biases when true; the MLP has none)."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import KeyMap, prefixed, strip_prefix
from .layer_kinds import branch_norm_keymap, with_defaults
from .llama import decoder_config, decoder_keymap

MODEL_TYPES = ("olmo2",)
LAYER_MARKER = "layers."
DEFAULTS = dict(vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                num_attention_heads=32, hidden_act="silu", max_position_embeddings=2048,
                rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False)


def detect(names: set[str]) -> bool:
    # norms after the branches, none before them
    return any(n.endswith("post_feedforward_layernorm.weight") for n in names) and \
        not any(n.endswith("input_layernorm.weight") for n in names)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = with_defaults(cfg, DEFAULTS)
    if cfg.get("num_key_value_heads") is None:     # null: as many as the query heads
        cfg["num_key_value_heads"] = cfg.get("num_attention_heads")
    return decoder_config(cfg, source, names, "olmo2", norm="branch_out", qk_norm=True,
                          qk_norm_over="projection", mlp_bias=False)


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    keys = branch_norm_keymap(decoder_keymap(config), config, "post_attention_layernorm", None,
                              "post_feedforward_layernorm")
    return prefixed(keys, strip_prefix(names, ("model.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise ModelError("an OLMo 2 checkpoint (norms after the branches) without its config.json: "
                     "rope_theta and rms_norm_eps are not in the tensors; put the model's "
                     "config.json beside the file")
