"""Per family: config.json -> ModelConfig, and checkpoint tensor names -> the core's names.

Each map yields (core_name, checkpoint_name, transform); transforms normalise layouts once,
here, so the core always sees weights as [d_in, d_out]. A transform also says which shape
the checkpoint tensor must have, so a misshapen tensor is caught before it is read."""
from __future__ import annotations

import math
import re
from typing import Iterable, Optional

import numpy as np

from ..core.config import ModelConfig
from ..core.errors import ModelError

_ACTIVATIONS = {"gelu": "gelu_erf", "gelu_python": "gelu_erf", "gelu_new": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "relu": "relu"}


class Transform:
    """Identity: the checkpoint tensor is already in the core's layout."""

    def checkpoint_shape(self, core_shape: tuple[int, ...]) -> tuple[int, ...]:
        return core_shape

    def __call__(self, w: np.ndarray) -> np.ndarray:
        return w


class Transpose(Transform):
    """nn.Linear stores [out, in]; the core wants [in, out]. Copied to C order once, here:
    OpenBLAS multiplies by a transposed (Fortran-order) view up to 5x slower (measured on
    BERT's [1536, 384] output dense at 16 tokens)."""

    def checkpoint_shape(self, core_shape):
        return core_shape[::-1]

    def __call__(self, w):
        return np.ascontiguousarray(w.T)


class Columns(Transform):
    """Part `index` of `parts` equal blocks along the last axis: GPT-2's fused c_attn is
    [d_in, 3*d_model] with q|k|v side by side. Returns a view."""

    def __init__(self, index: int, parts: int) -> None:
        self.index, self.parts = index, parts

    def checkpoint_shape(self, core_shape):
        return core_shape[:-1] + (core_shape[-1] * self.parts,)

    def __call__(self, w):
        width = w.shape[-1] // self.parts
        return w[..., self.index * width:(self.index + 1) * width]


IDENTITY, TRANSPOSE = Transform(), Transpose()
KeyMap = list[tuple[str, str, Transform]]


# ------------------------------------------------------------------------- reading config.json
def _int(cfg: dict, key: str, source: str, default: Optional[int] = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise ModelError(f"{source}: config.json has no {key!r}")
    if type(value) is not int or value <= 0:  # bool is an int subclass: refuse it too
        raise ModelError(f"{source}: {key} must be a positive integer, got {value!r}")
    return value


def _eps(cfg: dict, key: str, source: str, default: float) -> float:
    value = cfg.get(key, default)
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise ModelError(f"{source}: {key} must be a non-negative number, got {value!r}")
    return float(value)


def _activation(cfg: dict, key: str, source: str, default: str) -> str:
    name = cfg.get(key, default)
    if not isinstance(name, str) or name not in _ACTIVATIONS:
        raise ModelError(f"{source}: unsupported {key} {name!r} "
                         f"(supported: {', '.join(sorted(_ACTIVATIONS))})")
    return _ACTIVATIONS[name]


def _heads(d_model: int, n_head: int, source: str, d_key: str, h_key: str) -> None:
    if d_model % n_head:
        raise ModelError(f"{source}: {d_key}={d_model} is not divisible by {h_key}={n_head}")


def _name(cfg: dict) -> str:
    name = cfg.get("_name_or_path")
    return name if isinstance(name, str) else ""


def tied_head(cfg: dict) -> bool:
    """The LM head is wte itself (the core computes logits as h @ wte.T) unless the config
    unties it; then the checkpoint's own lm_head/decoder weights would be needed."""
    return cfg.get("tie_word_embeddings", True) is not False


def build_config(source: str, **fields) -> ModelConfig:
    """ModelConfig(**fields), with its own checks reported against `source`."""
    try:
        return ModelConfig(**fields)
    except ModelError as exc:
        raise ModelError(f"{source}: {str(exc).removeprefix('config: ')}") from None


# ---------------------------------------------------------------------------------------- BERT
def bert_config(cfg: dict, source: str, has_mlm_head: bool) -> ModelConfig:
    position = cfg.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ModelError(f"{source}: unsupported position_embedding_type {position!r} (only 'absolute')")
    d_model, n_head = _int(cfg, "hidden_size", source), _int(cfg, "num_attention_heads", source)
    _heads(d_model, n_head, source, "hidden_size", "num_attention_heads")
    n_token_types = cfg.get("type_vocab_size", 2)
    if type(n_token_types) is not int or n_token_types < 0:
        raise ModelError(f"{source}: type_vocab_size must be a non-negative integer, got {n_token_types!r}")
    return build_config(
        source, family="bert", name=_name(cfg),
        n_vocab=_int(cfg, "vocab_size", source), n_ctx=_int(cfg, "max_position_embeddings", source, 512),
        d_model=d_model, n_head=n_head, n_layer=_int(cfg, "num_hidden_layers", source),
        d_ff=_int(cfg, "intermediate_size", source),
        position="learned", norm="post", embed_norm=True, n_token_types=n_token_types,
        causal=bool(cfg.get("is_decoder", False)),  # BertModel masks causally as a decoder
        activation=_activation(cfg, "hidden_act", source, "gelu"),
        ln_eps=_eps(cfg, "layer_norm_eps", source, 1e-12), final_norm=False,
        lm_head=has_mlm_head and tied_head(cfg), lm_head_transform=has_mlm_head and tied_head(cfg))


def bert_keymap(config: ModelConfig, ln_names: tuple[str, str]) -> KeyMap:
    g, b = ln_names  # ("weight", "bias") or the old TF-ported ("gamma", "beta")
    keys: KeyMap = [
        ("wte", "embeddings.word_embeddings.weight", IDENTITY),
        ("wpe", "embeddings.position_embeddings.weight", IDENTITY),
        ("ln_emb.g", f"embeddings.LayerNorm.{g}", IDENTITY),
        ("ln_emb.b", f"embeddings.LayerNorm.{b}", IDENTITY),
    ]
    if config.n_token_types:
        keys.append(("wtt", "embeddings.token_type_embeddings.weight", IDENTITY))
    for i in range(config.n_layer):
        p = f"encoder.layer.{i}."
        for core, ckpt in (("q", "attention.self.query"), ("k", "attention.self.key"),
                           ("v", "attention.self.value"), ("o", "attention.output.dense")):
            keys.append((f"h.{i}.attn.{core}.w", p + ckpt + ".weight", TRANSPOSE))
            keys.append((f"h.{i}.attn.{core}.b", p + ckpt + ".bias", IDENTITY))
        for core, ckpt in (("ln_1", "attention.output.LayerNorm"), ("ln_2", "output.LayerNorm")):
            keys.append((f"h.{i}.{core}.g", f"{p}{ckpt}.{g}", IDENTITY))
            keys.append((f"h.{i}.{core}.b", f"{p}{ckpt}.{b}", IDENTITY))
        for core, ckpt in (("fc", "intermediate.dense"), ("proj", "output.dense")):
            keys.append((f"h.{i}.mlp.{core}.w", p + ckpt + ".weight", TRANSPOSE))
            keys.append((f"h.{i}.mlp.{core}.b", p + ckpt + ".bias", IDENTITY))
    if config.lm_head_transform:
        keys += [
            ("head.transform.w", "cls.predictions.transform.dense.weight", TRANSPOSE),
            ("head.transform.b", "cls.predictions.transform.dense.bias", IDENTITY),
            ("head.ln.g", f"cls.predictions.transform.LayerNorm.{g}", IDENTITY),
            ("head.ln.b", f"cls.predictions.transform.LayerNorm.{b}", IDENTITY),
            ("head.bias", "cls.predictions.bias", IDENTITY),
        ]
    return keys


# ---------------------------------------------------------------------------------------- GPT-2
def gpt2_config(cfg: dict, source: str) -> ModelConfig:
    for flag, ok in (("scale_attn_by_inverse_layer_idx", False), ("reorder_and_upcast_attn", False),
                     ("scale_attn_weights", True)):
        if cfg.get(flag, ok) != ok:
            raise ModelError(f"{source}: unsupported GPT-2 option {flag}={cfg[flag]!r}")
    d_model, n_head = _int(cfg, "n_embd", source), _int(cfg, "n_head", source)
    _heads(d_model, n_head, source, "n_embd", "n_head")
    n_inner = cfg.get("n_inner")
    return build_config(
        source, family="gpt2", name=_name(cfg),
        n_vocab=_int(cfg, "vocab_size", source), n_ctx=_int(cfg, "n_positions", source, 1024),
        d_model=d_model, n_head=n_head, n_layer=_int(cfg, "n_layer", source),
        d_ff=4 * d_model if n_inner is None else _int(cfg, "n_inner", source),
        position="learned", norm="pre", embed_norm=False, n_token_types=0, causal=True,
        activation=_activation(cfg, "activation_function", source, "gelu_new"),
        ln_eps=_eps(cfg, "layer_norm_epsilon", source, 1e-5), final_norm=True, lm_head=tied_head(cfg))


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


# ----------------------------------------------------------------------- inferring from names
def strip_prefix(names: Iterable[str], prefixes: tuple[str, ...]) -> str:
    """The prefix ('bert.', 'transformer.' or '') under which the base model's tensors live."""
    names = list(names)
    for prefix in prefixes:
        if any(n.startswith(prefix) for n in names):
            return prefix
    return ""


def detect_family(names: set[str]) -> Optional[str]:
    if any(n.endswith("attn.c_attn.weight") for n in names):
        return "gpt2"
    if any(n.endswith("attention.self.query.weight") for n in names):
        return "bert"
    if "wte" in names and any(n.endswith(".attn.q.w") for n in names):
        return "stepper"
    return None


def count_layers(names: Iterable[str], marker: str) -> int:
    """Number of blocks: the largest i with `<marker>{i}.` in some name (at the start or
    after a dot), plus one."""
    pattern = re.compile(r"(?:^|\.)" + re.escape(marker) + r"(\d+)\.")
    found = {int(m.group(1)) for n in names for m in [pattern.search(n)] if m}
    return max(found) + 1 if found else 0
