"""Qwen3-MoE (`qwen3_moe`, Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention (GQA, per-head
q/k RMSNorm before the rotation, an explicit head_dim) with sparse mixture-of-experts
feed-forwards: softmax over num_experts, the top num_experts_per_tok, divided by their sum only
when norm_topk_prob (core/model/moe.py). Layers listed in mlp_only_layers, or where (layer + 1) %
decoder_sparse_step != 0, keep a dense SwiGLU of intermediate_size.

Keys read and transformers' Qwen3MoeConfig defaults used when absent: vocab_size 151936,
hidden_size 2048, intermediate_size 6144 (dense layers), moe_intermediate_size 768 (an
expert), num_hidden_layers 24, num_attention_heads 32, num_key_value_heads 4, head_dim
hidden_size / num_attention_heads, hidden_act silu, max_position_embeddings 32768, rms_norm_eps
1e-6, tie_word_embeddings false, rope_theta 10000 (rope_parameters / rope_scaling),
attention_bias false, use_sliding_window false (true is refused), decoder_sparse_step 1,
mlp_only_layers [], num_experts 128, num_experts_per_tok 8, norm_topk_prob false."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from .common import KeyMap, prefixed, strip_prefix
from .layer_kinds import with_defaults
from .gguf_layout import decoder_config as gguf_decoder_config, decoder_layout, expert_config, qwen_expert_config
from .llama import decoder_config, decoder_keymap
from .moe_layout import renamed, dense_layers, detect_experts, expert_fields, moe_keymap, needs_config

MODEL_TYPES = ("qwen3_moe",)
LAYER_MARKER = "layers."
DEFAULTS = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
                num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=4, hidden_act="silu",
                max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=False,
                rope_theta=10000.0, attention_bias=False, use_sliding_window=False,
                decoder_sparse_step=1, mlp_only_layers=[], num_experts=128, num_experts_per_tok=8,
                norm_topk_prob=False)
PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def detect(names: set[str]) -> bool:
    # Qwen2-MoE's layout with per-head q/k norms and no shared expert
    return detect_experts(names, "mlp.gate", ".mlp.experts.") and \
        any(n.endswith("self_attn.q_norm.weight") for n in names) and \
        not any(".shared_expert" in n for n in names)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = with_defaults(renamed(cfg, "num_local_experts", "num_experts", source), DEFAULTS)
    n_layer = cfg["num_hidden_layers"]
    fields = expert_fields(cfg, source, "num_experts", "moe_intermediate_size",
                           dense=dense_layers(cfg, source, n_layer if type(n_layer) is int else 0))
    return decoder_config(cfg, source, names, "qwen3", mlp_bias=False, **fields).replace(family="qwen3_moe")


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    keys = moe_keymap(decoder_keymap(config), config, "mlp.", "gate", "experts.{e}", PROJECTIONS)
    return prefixed(keys, strip_prefix(names, ("model.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise needs_config("Qwen3-MoE (or OLMoE: their tensor names are alike)")


def _gguf_config(files: list, arch: str) -> dict:
    cfg = gguf_decoder_config(files, arch, head_dim=True)
    return {**cfg, **expert_config(files, arch, "qwen3_moe", "num_experts", True),
            **qwen_expert_config(files, arch, cfg["num_hidden_layers"])}


GGUF_LAYOUTS = (decoder_layout("qwen3moe", _gguf_config, experts=True),)
