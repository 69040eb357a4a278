"""Phi-3, Phi-3.5 and Phi-4-mini (model_type phi3): Llama's layout with two fused projections,
split at load for display as GPT-2's c_attn is:
  self_attn.qkv_proj [n_head·d_head + 2·n_kv·d_head, d_model]: rows q | k | v
  mlp.gate_up_proj [2·d_ff, d_model]: rows gate | up (transformers' chunk(2): gate first)
LongRoPE scaling (longrope, or its old names su / yarn) with short and long factors and its
attention factor, partial rotary (Phi-4-mini: partial_rotary_factor 0.75), an optional sliding
window (Phi-3-mini-4k: 2047). No biases anywhere.

transformers 5's Phi3Config defaults for the keys read here: vocab_size 32064, hidden_size
3072, intermediate_size 8192, num_hidden_layers 32, num_attention_heads 32, num_key_value_heads
= num_attention_heads, hidden_act silu, max_position_embeddings 4096,
original_max_position_embeddings 4096 (it overrides the rope dict's), rms_norm_eps 1e-5,
tie_word_embeddings false, rope_theta 10000, partial_rotary_factor 1.0, sliding_window null
(no window). head_dim is hidden_size / num_attention_heads."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import (IDENTITY, TRANSPOSE, KeyMap, Transform, activation, build, display_name,
                     divisible, integer, number, prefixed, strip_prefix, tied)
from .llama import ACTIVATIONS
from .rope import rope_fields

MODEL_TYPES = ("phi3",)
LAYER_MARKER = "layers."
CONFIG_DEFAULTS = dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                       num_attention_heads=32, hidden_act="silu", max_position_embeddings=4096,
                       rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=10000.0)


class Rows(Transform):
    """Rows start:stop of an nn.Linear weight [d_out, d_in] (or of its bias [d_out]), as the
    core's [d_in, stop - start] (a transposed view; the bias: a view)."""

    def __init__(self, start: int, stop: int, total: int) -> None:
        self.start, self.stop, self.total = start, stop, total

    def checkpoint_shape(self, core_shape):
        return (self.total,) if len(core_shape) == 1 else (self.total, core_shape[0])

    def __call__(self, w):
        part = w[self.start:self.stop]
        return part if part.ndim == 1 else part.T


def detect(names: set[str]) -> bool:
    return any(n.endswith("self_attn.qkv_proj.weight") for n in names) and \
        any(n.endswith("mlp.gate_up_proj.weight") for n in names)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = {**CONFIG_DEFAULTS, **cfg}
    d_model, n_head = integer(cfg, "hidden_size", source), integer(cfg, "num_attention_heads", source)
    n_kv = integer(cfg, "num_key_value_heads", source, n_head)
    divisible(n_head, n_kv, source, "num_attention_heads", "num_key_value_heads")
    divisible(d_model, n_head, source, "hidden_size", "num_attention_heads")
    if cfg.get("head_dim") not in (None, d_model // n_head):
        raise ModelError(f"{source}: head_dim={cfg['head_dim']!r} differs from hidden_size / "
                         f"num_attention_heads, which Phi-3 does not support")
    d_head = d_model // n_head
    n_ctx = integer(cfg, "max_position_embeddings", source)
    window = cfg.get("sliding_window")
    is_tied = tied(cfg, default=False)
    fields = dict(
        family="phi3", name=display_name(cfg), n_vocab=integer(cfg, "vocab_size", source), n_ctx=n_ctx,
        d_model=d_model, n_head=n_head, n_kv_head=n_kv if n_kv != n_head else 0,
        n_layer=integer(cfg, "num_hidden_layers", source), d_ff=integer(cfg, "intermediate_size", source),
        position="rotary", norm="pre", norm_kind="rms", causal=True, gated_mlp=True,
        activation=activation(cfg, "hidden_act", source, "silu", ACTIVATIONS),
        ln_eps=number(cfg, "rms_norm_eps", source, 1e-5), final_norm=True,
        lm_head=is_tied or any(n.startswith("lm_head.") for n in names), tied_head=is_tied,
        qkv_bias=False, o_bias=False, mlp_bias=False,
        sliding_window=0 if window is None else integer(cfg, "sliding_window", source))
    fields.update(rope_fields(cfg, source, d_head, n_ctx, model_type="phi3"))
    return build(source, **fields)


def phi3_keymap(config: ModelConfig) -> KeyMap:
    d_q, d_kv, d_ff = config.n_head * config.d_head, config.n_kv_heads * config.d_head, config.d_ff
    fused = d_q + 2 * d_kv
    keys: KeyMap = [("wte", "embed_tokens.weight", IDENTITY), ("ln_f.g", "norm.weight", IDENTITY)]
    for i in range(config.n_layer):
        p = f"layers.{i}."
        keys += [(f"h.{i}.ln_1.g", p + "input_layernorm.weight", IDENTITY),
                 (f"h.{i}.ln_2.g", p + "post_attention_layernorm.weight", IDENTITY),
                 (f"h.{i}.attn.q.w", p + "self_attn.qkv_proj.weight", Rows(0, d_q, fused)),
                 (f"h.{i}.attn.k.w", p + "self_attn.qkv_proj.weight", Rows(d_q, d_q + d_kv, fused)),
                 (f"h.{i}.attn.v.w", p + "self_attn.qkv_proj.weight", Rows(d_q + d_kv, fused, fused)),
                 (f"h.{i}.attn.o.w", p + "self_attn.o_proj.weight", TRANSPOSE),
                 (f"h.{i}.mlp.gate.w", p + "mlp.gate_up_proj.weight", Rows(0, d_ff, 2 * d_ff)),
                 (f"h.{i}.mlp.up.w", p + "mlp.gate_up_proj.weight", Rows(d_ff, 2 * d_ff, 2 * d_ff)),
                 (f"h.{i}.mlp.proj.w", p + "mlp.down_proj.weight", TRANSPOSE)]
    if config.lm_head and not config.tied_head:
        keys.append(("lm_head.w", "lm_head.weight", IDENTITY))
    return keys


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    return prefixed(phi3_keymap(config), strip_prefix(names, ("model.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise ModelError("a Phi-3 file (fused qkv_proj and gate_up_proj) does not say its head count, "
                     "rope base or LongRoPE factors; put the model's config.json (from its Hugging "
                     "Face repository, e.g. microsoft/Phi-3-mini-4k-instruct) beside it")
