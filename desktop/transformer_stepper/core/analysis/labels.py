"""How architecture fields read on screen: one table, so views and explanations agree."""
from __future__ import annotations

import numpy as np

from ..model.tokenize import Tokenizer
from ..trace.trace import Trace

ACTIVATION_LABELS = {"gelu_erf": "GELU (exact, with erf)", "gelu_tanh": "GELU (tanh approximation)",
                     "relu": "ReLU", "silu": "SiLU (x·sigmoid(x))"}
ACTIVATION_SHORT = {"gelu_erf": "GELU", "gelu_tanh": "GELU (tanh)", "relu": "ReLU", "silu": "SiLU"}
NORM_LABELS = {"layer": "LayerNorm", "rms": "RMSNorm"}
POSITION_LABELS = {"learned": "learned position rows, added", "sinusoidal": "fixed sinusoids, added",
                   "rotary": "rotary: q and k turned by position", "none": "no position information",
                   "concat": "fixed sinusoids, concatenated: [e | p]"}


def readable(piece: str) -> str:
    """A piece as the app shows it everywhere: the space it carries as '␣' (byte-level BPE
    writes 'Ġ', SentencePiece '▁'), a newline as '↵' ('Ċ'); an all-blank piece as its repr."""
    label = piece.replace("Ġ", "␣").replace("Ċ", "↵").replace("▁", "␣")
    return label if label.strip() else repr(piece)


def layer_kind(config, layer: int) -> str:
    """What sets a layer apart where layers differ: "local (window 4)", "global", "no rope"
    (Gemma 2/3's local and global layers, SmolLM3's NoPE layers), "dense feed-forward" (a
    mixture-of-experts model's layer without a router); "" where every layer is alike."""
    kinds = []
    if config.local_layers:
        if config.is_local(layer):
            details = ([f"window {config.sliding_window}"] if config.sliding_window else []) + \
                ([f"rope base {config.rope_local_theta:g}"] if config.rope_local_theta else [])
            kinds.append("local" + (f" ({', '.join(details)})" if details else ""))
        else:
            kinds.append("global" + (f" (rope base {config.rope_theta:g})" if config.rope_local_theta else ""))
    if config.position == "rotary" and not config.has_rope(layer):
        kinds.append("no rope")
    if getattr(config, "is_moe", False) and not config.is_moe_layer(layer):
        kinds.append("dense feed-forward")
    return ", ".join(kinds)


def token_labels(trace: Trace, tokenizer: Tokenizer) -> list[str]:
    """How each token reads on a plot axis: the tokenizer's piece made readable (readable)."""
    return [readable(piece) for piece in trace.tokens]


def default_token(trace: Trace) -> int:
    """Not a special token ([CLS] is rarely the interesting one): in a causal model the last
    one, which sees the whole text; otherwise the first."""
    ordinary = np.flatnonzero(~trace.special_tokens_mask)
    if not len(ordinary):
        return 0
    return int(ordinary[-1] if trace.config.causal else ordinary[0])


def kept_characters(trace: Trace) -> int:
    """How many characters of the text its tokens cover: all of them, unless the text was
    longer than the model's context and cut (then the rest, len(text) − this, was dropped)."""
    ordinary = np.flatnonzero(~trace.special_tokens_mask)
    if not trace.truncated:
        return len(trace.text)
    return int(trace.offsets[ordinary, 1].max()) if len(ordinary) else 0
