"""GPT-2: wte + wpe, pre-LN blocks, causal mask, tanh GELU; Conv1D weights stored [in, out];
the fused c_attn split into q, k, v (views); LM head tied to wte; final ln_f."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import (ASSUMED_D_HEAD, IDENTITY, Columns, KeyMap, activation, build, count_layers, display_name,
                     divisible, integer, number, prefixed, strip_prefix, tied)
from .gguf_layout import GGUFLayout, vocab_size

MODEL_TYPES = ("gpt2",)
LAYER_MARKER = "h."
ACTIVATIONS = {"gelu": "gelu_erf", "gelu_python": "gelu_erf", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "relu": "relu"}


def detect(names: set[str]) -> bool:
    return any(n.endswith("attn.c_attn.weight") for n in names)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    if not tied(cfg):
        warnings.append(f"{source}: tie_word_embeddings is false and a separate LM head is not "
                        f"supported: no logits or predictions")
    for option, ok in (("scale_attn_by_inverse_layer_idx", False), ("reorder_and_upcast_attn", False),
                       ("scale_attn_weights", True)):
        if cfg.get(option, ok) != ok:
            raise ModelError(f"{source}: unsupported GPT-2 option {option}={cfg[option]!r}")
    d_model, n_head = integer(cfg, "n_embd", source), integer(cfg, "n_head", source)
    divisible(d_model, n_head, source, "n_embd", "n_head")
    n_inner = cfg.get("n_inner")
    return build(
        source, family="gpt2", name=display_name(cfg),
        n_vocab=integer(cfg, "vocab_size", source), n_ctx=integer(cfg, "n_positions", source, 1024),
        d_model=d_model, n_head=n_head, n_layer=integer(cfg, "n_layer", source),
        d_ff=4 * d_model if n_inner is None else integer(cfg, "n_inner", source),
        position="learned", norm="pre", embed_norm=False, n_token_types=0, causal=True,
        activation=activation(cfg, "activation_function", source, "gelu_new", ACTIVATIONS),
        ln_eps=number(cfg, "layer_norm_epsilon", source, 1e-5), final_norm=True, lm_head=tied(cfg))


def gpt2_keymap(config: ModelConfig) -> KeyMap:
    keys: KeyMap = [("wte", "wte.weight", IDENTITY), ("wpe", "wpe.weight", IDENTITY),
                    ("ln_f.g", "ln_f.weight", IDENTITY), ("ln_f.b", "ln_f.bias", IDENTITY)]
    for i in range(config.n_layer):
        p = f"h.{i}."
        for j, name in enumerate("qkv"):  # Conv1D weights are already [in, out]
            keys.append((f"h.{i}.attn.{name}.w", p + "attn.c_attn.weight", Columns(j, 3)))
            keys.append((f"h.{i}.attn.{name}.b", p + "attn.c_attn.bias", Columns(j, 3)))
        for core, ckpt in (("attn.o", "attn.c_proj"), ("ln_1", "ln_1"), ("ln_2", "ln_2"),
                           ("mlp.fc", "mlp.c_fc"), ("mlp.proj", "mlp.c_proj")):
            g, b = ("g", "b") if core.startswith("ln") else ("w", "b")
            keys.append((f"h.{i}.{core}.{g}", f"{p}{ckpt}.weight", IDENTITY))
            keys.append((f"h.{i}.{core}.{b}", f"{p}{ckpt}.bias", IDENTITY))
    return keys


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    return prefixed(gpt2_keymap(config), strip_prefix(names, ("transformer.",)))


def infer_hf_config(shape, names: set[str]) -> dict:
    p = strip_prefix(names, ("transformer.",))
    n_vocab, d_model = shape(p + "wte.weight", 2)
    return {"model_type": "gpt2", "vocab_size": n_vocab, "n_embd": d_model,
            "n_positions": shape(p + "wpe.weight", 2)[0],
            "n_inner": shape(p + "h.0.mlp.c_fc.weight", 2)[1],
            "n_layer": count_layers(names, LAYER_MARKER), "n_head": max(d_model // ASSUMED_D_HEAD, 1)}


def _gguf_config(files: list, arch: str) -> dict:
    f = files[0]
    return {"model_type": "gpt2", "vocab_size": vocab_size(files, arch),
            "n_embd": f.integer(f"{arch}.embedding_length"), "n_layer": f.integer(f"{arch}.block_count"),
            "n_head": f.integer(f"{arch}.attention.head_count"),
            "n_positions": f.integer(f"{arch}.context_length"),
            "n_inner": f.integer(f"{arch}.feed_forward_length"),
            "layer_norm_epsilon": f.number(f"{arch}.attention.layer_norm_epsilon"),
            "activation_function": "gelu_new", "tie_word_embeddings": True}


# llama.cpp stores the Conv1D weights [out, in] and GPT-2's head as its own output.weight
# (quantized apart from wte)
GGUF_LAYOUTS = (GGUFLayout(
    "gpt2", _gguf_config,
    top={"token_embd": "wte", "position_embd": "wpe", "output_norm": "ln_f", "output": "lm_head"},
    block={"attn_norm": "ln_1", "ffn_norm": "ln_2", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj",
           "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"},
    layer="h.{}.", embedding="wte.weight",
    fixes={f"{leaf}.weight": "transposed" for leaf in ("attn_qkv", "attn_output", "ffn_up", "ffn_down")},
    separate_head=True),)
