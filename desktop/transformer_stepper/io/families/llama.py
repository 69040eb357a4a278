"""Llama and its close kin (Mistral, Qwen2/2.5, Qwen3, SmolLM, TinyLlama): RMSNorm before each
sub-layer, rotary positions on q and k, SwiGLU feed-forward, grouped-query attention.
Differences are config fields: biases on q/k/v (Qwen2), per-head q/k RMSNorm and an explicit
head_dim (Qwen3), a sliding window (Mistral), rope scaling (Llama 3.1/3.2: llama3; linear)."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import (ASSUMED_D_HEAD, IDENTITY, TRANSPOSE, KeyMap, activation, build, count_layers, display_name,
                     divisible, flag, integer, number, prefixed, strip_prefix, tied)
from .gguf_layout import UNPERMUTE_QK, decoder_config as gguf_decoder_config, decoder_layout
from .rope import rope_fields

MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
LAYER_MARKER = "layers."
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu_erf", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_new": "gelu_tanh", "relu": "relu"}
# transformers 5's config class defaults for the keys read here that a config.json may leave
# out (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config); a key present as null stays null
# (Mistral's "sliding_window": null means no window; a missing one means 4096).
CONFIG_DEFAULTS = {
    "llama": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                  num_attention_heads=32, hidden_act="silu", max_position_embeddings=2048,
                  rms_norm_eps=1e-6, tie_word_embeddings=False, rope_theta=10000.0,
                  attention_bias=False, mlp_bias=False),
    "mistral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
                    max_position_embeddings=131072, rms_norm_eps=1e-6, tie_word_embeddings=False,
                    rope_theta=10000.0, sliding_window=4096),
    "qwen2": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
                  num_attention_heads=32, hidden_act="silu", max_position_embeddings=32768,
                  rms_norm_eps=1e-6, tie_word_embeddings=False, rope_theta=10000.0,
                  use_sliding_window=False),
    "qwen3": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
                  num_attention_heads=32, head_dim=128, hidden_act="silu", max_position_embeddings=32768,
                  rms_norm_eps=1e-6, tie_word_embeddings=False, rope_theta=10000.0,
                  attention_bias=False, use_sliding_window=False),
}
_BIASES = {  # (q/k/v, o, mlp) biases when the config does not say
    "llama": None, "mistral": (False, False, False), "qwen2": (True, False, False), "qwen3": None}


def detect(names: set[str]) -> bool:
    return any(n.endswith("self_attn.q_proj.weight") for n in names) and \
        any(n.endswith("mlp.gate_proj.weight") for n in names)


def decoder_config(cfg: dict, source: str, names: set[str], family: str, **overrides) -> ModelConfig:
    """The Llama layout's config; Gemma passes its own differences as overrides."""
    d_model, n_head = integer(cfg, "hidden_size", source), integer(cfg, "num_attention_heads", source)
    n_kv = integer(cfg, "num_key_value_heads", source, n_head)
    divisible(n_head, n_kv, source, "num_attention_heads", "num_key_value_heads")
    head_dim = cfg.get("head_dim")
    if head_dim is None:
        divisible(d_model, n_head, source, "hidden_size", "num_attention_heads")
        head_dim = d_model // n_head
    else:
        head_dim = integer(cfg, "head_dim", source)
    if head_dim % 2:
        raise ModelError(f"{source}: head_dim={head_dim} must be even for rotary positions")
    default_biases = _BIASES.get(family)
    attention_bias = flag(cfg, "attention_bias", source, False)
    qkv_bias, o_bias, mlp_bias = default_biases or (attention_bias, attention_bias,
                                                    flag(cfg, "mlp_bias", source, False))
    window = 0
    if family == "mistral" and cfg.get("sliding_window") is not None:
        window = integer(cfg, "sliding_window", source)
    if family in ("qwen2", "qwen3") and flag(cfg, "use_sliding_window", source, False):
        raise ModelError(f"{source}: use_sliding_window=true (per-layer windows) is not supported")
    is_tied = tied(cfg, default=False)
    n_ctx = integer(cfg, "max_position_embeddings", source, 2048)
    fields = dict(
        family=family, name=display_name(cfg),
        n_vocab=integer(cfg, "vocab_size", source),
        n_ctx=n_ctx, d_model=d_model, n_head=n_head, n_kv_head=n_kv if n_kv != n_head else 0,
        head_dim=head_dim if head_dim * n_head != d_model else 0,
        n_layer=integer(cfg, "num_hidden_layers", source),
        d_ff=integer(cfg, "intermediate_size", source),
        position="rotary", norm="pre", norm_kind="rms", causal=True, gated_mlp=True,
        activation=activation(cfg, "hidden_act", source, "silu", ACTIVATIONS),
        ln_eps=number(cfg, "rms_norm_eps", source, 1e-6), final_norm=True,
        lm_head=is_tied or "lm_head.weight" in names, tied_head=is_tied,
        qkv_bias=qkv_bias, o_bias=o_bias, mlp_bias=mlp_bias, qk_norm=family == "qwen3",
        sliding_window=window)
    fields.update(rope_fields(cfg, source, head_dim, n_ctx, model_type=family))
    if fields["rotary_dim"]:    # transformers' Llama-family rotation turns the whole head
        raise ModelError(f"{source}: partial_rotary_factor={cfg.get('partial_rotary_factor')!r} is "
                         f"not supported for {family} (only 1.0)")
    fields.update(overrides)
    return build(source, **fields)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    family = cfg.get("model_type", "llama")
    return decoder_config({**CONFIG_DEFAULTS.get(family, {}), **cfg}, source, names, family)


def decoder_keymap(config: ModelConfig, norm_transform=IDENTITY) -> KeyMap:
    """Names inside the base model (embed_tokens, layers.{i}., norm), plus lm_head outside."""
    keys: KeyMap = [("wte", "embed_tokens.weight", IDENTITY), ("ln_f.g", "norm.weight", norm_transform)]
    for i in range(config.n_layer):
        p = f"layers.{i}."
        keys += [(f"h.{i}.ln_1.g", p + "input_layernorm.weight", norm_transform),
                 (f"h.{i}.ln_2.g", p + "post_attention_layernorm.weight", norm_transform)]
        for core, ckpt, bias in (("attn.q", "self_attn.q_proj", config.qkv_bias),
                                 ("attn.k", "self_attn.k_proj", config.qkv_bias),
                                 ("attn.v", "self_attn.v_proj", config.qkv_bias),
                                 ("attn.o", "self_attn.o_proj", config.o_bias),
                                 ("mlp.gate", "mlp.gate_proj", config.mlp_bias),
                                 ("mlp.up", "mlp.up_proj", config.mlp_bias),
                                 ("mlp.proj", "mlp.down_proj", config.mlp_bias)):
            keys.append((f"h.{i}.{core}.w", p + ckpt + ".weight", TRANSPOSE))
            if bias:
                keys.append((f"h.{i}.{core}.b", p + ckpt + ".bias", IDENTITY))
        if config.qk_norm:
            keys += [(f"h.{i}.attn.q_norm.g", p + "self_attn.q_norm.weight", norm_transform),
                     (f"h.{i}.attn.k_norm.g", p + "self_attn.k_norm.weight", norm_transform)]
    if config.lm_head and not config.tied_head:
        keys.append(("lm_head.w", "lm_head.weight", IDENTITY))   # [n_vocab, d_model], like wte
    return keys


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    return prefixed(decoder_keymap(config), strip_prefix(names, ("model.",)), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    p = strip_prefix(names, ("model.",))
    n_vocab, d_model = shape(p + "embed_tokens.weight", 2)
    d_q = shape(p + "layers.0.self_attn.q_proj.weight", 2)[0]
    d_kv = shape(p + "layers.0.self_attn.k_proj.weight", 2)[0]
    q_norm = p + "layers.0.self_attn.q_norm.weight"
    if q_norm in names:                          # Qwen3: the per-head norm is as wide as a head
        head_dim = shape(q_norm, 1)[0]
    else:                                        # a lone file does not say; 64 is the common width
        head_dim = ASSUMED_D_HEAD if d_q % ASSUMED_D_HEAD == 0 else d_q
    model_type = "qwen3" if any(n.endswith("self_attn.q_norm.weight") for n in names) else (
        "qwen2" if any(n.endswith("self_attn.q_proj.bias") for n in names) else "llama")
    return {"model_type": model_type, "vocab_size": n_vocab, "hidden_size": d_model,
            "num_attention_heads": d_q // head_dim, "num_key_value_heads": d_kv // head_dim,
            "head_dim": head_dim, "intermediate_size": shape(p + "layers.0.mlp.gate_proj.weight", 2)[0],
            "num_hidden_layers": count_layers(names, LAYER_MARKER),
            "tie_word_embeddings": "lm_head.weight" not in names}


def gguf_llama_config(files: list, arch: str) -> dict:
    names = {n for g in files for n in g.tensors}
    return {**gguf_decoder_config(files, arch), "attention_bias": "blk.0.attn_q.bias" in names}


def _gguf_qwen3(files: list, arch: str) -> dict:
    return gguf_decoder_config(files, arch, head_dim=True)


# qwen2 and qwen3 are stored as Hugging Face has them; llama's q and k rows are permuted
GGUF_LAYOUTS = (decoder_layout("llama", gguf_llama_config, fixes=UNPERMUTE_QK),
                decoder_layout("qwen2", gguf_decoder_config),
                decoder_layout("qwen3", _gguf_qwen3))
