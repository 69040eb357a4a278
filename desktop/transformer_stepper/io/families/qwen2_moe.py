"""Qwen2-MoE (`qwen2_moe`, Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention (biases on
q, k, v; GQA; rotary) with sparse mixture-of-experts feed-forwards and, beside the routed
experts, a shared expert every token passes through, scaled by sigmoid(x · shared_expert_gate)
(core/model/moe.py). Top-k of the softmax over num_experts, divided by their sum only when
norm_topk_prob. Dense layers as Qwen3-MoE (mlp_only_layers, decoder_sparse_step).

Keys read and transformers' Qwen2MoeConfig defaults used when absent: vocab_size 151936,
hidden_size 2048, intermediate_size 5632 (dense layers), moe_intermediate_size 1408,
shared_expert_intermediate_size 5632, num_hidden_layers 24, num_attention_heads 16,
num_key_value_heads 16, hidden_act silu, max_position_embeddings 32768, rms_norm_eps 1e-6,
tie_word_embeddings false, rope_theta 10000 (rope_parameters / rope_scaling), qkv_bias true,
use_sliding_window false (true is refused), decoder_sparse_step 1, mlp_only_layers [],
num_experts 60, num_experts_per_tok 4, norm_topk_prob false."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from .common import KeyMap, flag, prefixed, strip_prefix
from .layer_kinds import with_defaults
from .gguf_layout import (decoder_config as gguf_decoder_config, decoder_layout, expert_config,
                          qwen_expert_config, tensor_names)
from .llama import decoder_config, decoder_keymap
from .moe_layout import renamed, dense_layers, detect_experts, expert_fields, moe_keymap, needs_config
from .qwen3_moe import PROJECTIONS

MODEL_TYPES = ("qwen2_moe",)
LAYER_MARKER = "layers."
DEFAULTS = dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632, moe_intermediate_size=1408,
                shared_expert_intermediate_size=5632, num_hidden_layers=24, num_attention_heads=16,
                num_key_value_heads=16, hidden_act="silu", max_position_embeddings=32768,
                rms_norm_eps=1e-6, tie_word_embeddings=False, rope_theta=10000.0, qkv_bias=True,
                use_sliding_window=False, decoder_sparse_step=1, mlp_only_layers=[], num_experts=60,
                num_experts_per_tok=4, norm_topk_prob=False)


def detect(names: set[str]) -> bool:
    return detect_experts(names, "mlp.gate", ".mlp.experts.") and \
        any(n.endswith("mlp.shared_expert_gate.weight") for n in names)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = with_defaults(renamed(cfg, "num_local_experts", "num_experts", source), DEFAULTS)
    if cfg.get("num_key_value_heads") is None:     # null: as many as the query heads
        cfg["num_key_value_heads"] = cfg.get("num_attention_heads")
    n_layer = cfg["num_hidden_layers"]
    fields = expert_fields(cfg, source, "num_experts", "moe_intermediate_size",
                           dense=dense_layers(cfg, source, n_layer if type(n_layer) is int else 0),
                           shared_key="shared_expert_intermediate_size")
    return decoder_config(cfg, source, names, "qwen2",
                          qkv_bias=flag(cfg, "qkv_bias", source, True), o_bias=False, mlp_bias=False,
                          **fields).replace(family="qwen2_moe")


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    keys = moe_keymap(decoder_keymap(config), config, "mlp.", "gate", "experts.{e}", PROJECTIONS,
                      shared="shared_expert", shared_gate="shared_expert_gate")
    return prefixed(keys, strip_prefix(names, ("model.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise needs_config("Qwen2-MoE")


def _gguf_config(files: list, arch: str) -> dict:
    cfg = gguf_decoder_config(files, arch)
    return {**cfg, **expert_config(files, arch, "qwen2_moe", "num_experts", False),
            **qwen_expert_config(files, arch, cfg["num_hidden_layers"]),
            "shared_expert_intermediate_size": files[0].integer(f"{arch}.expert_shared_feed_forward_length"),
            "qkv_bias": "blk.0.attn_q.bias" in tensor_names(files)}


# llama.cpp stores the shared expert's gate [d_model]; Hugging Face has [1, d_model]
GGUF_LAYOUTS = (decoder_layout("qwen2moe", _gguf_config, experts=True,
                               fixes={"ffn_gate_inp_shexp": "as_row"}),)
