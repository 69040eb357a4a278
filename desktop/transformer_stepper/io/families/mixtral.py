"""Mixtral (`mixtral`): Llama's attention (GQA, rotary, RMSNorm, an optional sliding window)
with every feed-forward a sparse mixture of experts: the router's softmax over
num_local_experts, the top num_experts_per_tok (2 of 8) kept and divided by their sum, each a
SwiGLU expert (w1 gate, w3 up, w2 down) — core/model/moe.py.

Keys read and transformers' MixtralConfig defaults used when absent: vocab_size 32000,
hidden_size 4096, intermediate_size 14336 (one expert's width), num_hidden_layers 32,
num_attention_heads 32, num_key_value_heads 8, head_dim hidden_size / num_attention_heads,
hidden_act silu, max_position_embeddings 131072, rms_norm_eps 1e-5, tie_word_embeddings false,
rope_theta 1e6 (rope_parameters / rope_scaling), sliding_window null (no window),
num_local_experts 8, num_experts_per_tok 2. (router_jitter_noise acts in training only.)"""
from __future__ import annotations

from ...core.model.config import ModelConfig
from .common import KeyMap, prefixed, strip_prefix
from .layer_kinds import with_defaults
from .gguf_layout import DECODER_BLOCK, UNPERMUTE_QK, decoder_layout, expert_config
from .llama import decoder_config, decoder_keymap, gguf_llama_config
from .moe_layout import renamed, detect_experts, expert_fields, moe_keymap, needs_config

MODEL_TYPES = ("mixtral",)
LAYER_MARKER = "layers."
DEFAULTS = dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
                max_position_embeddings=4096 * 32, rms_norm_eps=1e-5, tie_word_embeddings=False,
                rope_theta=1e6, sliding_window=None, num_local_experts=8, num_experts_per_tok=2)


def detect(names: set[str]) -> bool:
    return detect_experts(names, "block_sparse_moe.gate", ".block_sparse_moe.experts.")


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = with_defaults(renamed(cfg, "num_experts", "num_local_experts", source), DEFAULTS)
    # Mixtral's window is Mistral's: null means none
    family_cfg = {**cfg, "model_type": "mistral"}
    fields = expert_fields(cfg, source, "num_local_experts", "intermediate_size", norm_topk=True)
    return decoder_config(family_cfg, source, names, "mistral", qkv_bias=False,
                          o_bias=False, mlp_bias=False, **fields).replace(family="mixtral")


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    keys = moe_keymap(decoder_keymap(config), config, "block_sparse_moe.", "gate", "experts.{e}",
                      ("w1", "w3", "w2"))
    return prefixed(keys, strip_prefix(names, ("model.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise needs_config("Mixtral")


def _gguf_config(files: list, arch: str) -> dict:
    return {**gguf_llama_config(files, arch), **expert_config(files, arch, "mixtral", "num_local_experts", True)}


# llama.cpp stores Mixtral as `llama` with llama.expert_count (q and k permuted as Llama's)
GGUF_LAYOUTS = (decoder_layout(
    "llama", _gguf_config, experts=True, fixes=UNPERMUTE_QK,
    block={**DECODER_BLOCK, "ffn_gate_inp": "block_sparse_moe.gate"},
    expert_names={"ffn_gate_exps": "block_sparse_moe.experts.{e}.w1", "ffn_up_exps": "block_sparse_moe.experts.{e}.w3",
                  "ffn_down_exps": "block_sparse_moe.experts.{e}.w2"}),)
