"""What every family module shares: reading config.json fields with one-line errors, layout
transforms, and finding prefixes and layer counts in tensor names."""
from __future__ import annotations

import math
import re
from typing import Iterable, Optional

import numpy as np

from ...core.model.config import LIMITS, ModelConfig
from ...core.model.errors import ModelError
from ..keymaps import IDENTITY, TRANSPOSE, Columns, KeyMap, Transform  # noqa: F401  (re-exported)


# the head width a lone .safetensors is assumed to have when nothing in it says (BERT-base,
# GPT-2 and Llama 1-3 all use 64-wide heads); every such guess is named in the load warning
ASSUMED_D_HEAD = 64

def integer(cfg: dict, key: str, source: str, default: Optional[int] = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise ModelError(f"{source}: config.json has no {key!r}")
    if type(value) is not int or value <= 0:  # bool is an int subclass: refuse it too
        raise ModelError(f"{source}: {key} must be a positive integer, got {value!r}")
    return value


def number(cfg: dict, key: str, source: str, default: float, positive: bool = False) -> float:
    value = cfg.get(key, default)
    if value is None:
        value = default
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0 or (positive and value == 0):
        kind = "positive" if positive else "non-negative"
        raise ModelError(f"{source}: {key} must be a {kind} number, got {value!r}")
    return float(value)


def flag(cfg: dict, key: str, source: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if value is None:
        return default
    if type(value) is not bool:
        raise ModelError(f"{source}: {key} must be true or false, got {value!r}")
    return value


def activation(cfg: dict, key: str, source: str, default: str, names: dict[str, str]) -> str:
    name = cfg.get(key, default)
    if name is None:
        name = default
    if not isinstance(name, str) or name not in names:
        raise ModelError(f"{source}: unsupported {key} {name!r} (supported: {', '.join(sorted(names))})")
    return names[name]


def divisible(total: int, parts: int, source: str, total_key: str, parts_key: str) -> None:
    if total % parts:
        raise ModelError(f"{source}: {total_key}={total} is not divisible by {parts_key}={parts}")


def display_name(cfg: dict) -> str:
    name = cfg.get("_name_or_path")
    return name if isinstance(name, str) else ""


def tied(cfg: dict, default: bool = True) -> bool:
    value = cfg.get("tie_word_embeddings", default)
    return default if value is None else value is not False


def build(source: str, **fields) -> ModelConfig:
    """ModelConfig(**fields), with its own checks reported against `source`."""
    try:
        return ModelConfig(**fields)
    except ModelError as exc:
        raise ModelError(f"{source}: {str(exc).removeprefix('config: ')}") from None


def strip_prefix(names: Iterable[str], prefixes: tuple[str, ...]) -> str:
    """The prefix (e.g. 'bert.', 'model.' or '') under which the base model's tensors live."""
    names = list(names)
    for prefix in prefixes:
        if any(n.startswith(prefix) for n in names):
            return prefix
    return ""


def count_layers(names: Iterable[str], marker: str) -> int:
    """Number of blocks: the largest i with `<marker>{i}.` in some name (at the start or
    after a dot), plus one."""
    pattern = re.compile(r"(?:^|\.)" + re.escape(marker) + r"(\d+)\.")
    found = {int(m.group(1)): n for n in names for m in [pattern.search(n)] if m}
    if not found:
        return 0
    last = max(found)
    if last >= LIMITS["n_layer"]:   # a stray name must not make a billion layers
        raise ModelError(f"tensor {found[last]} names layer {last}, over the limit of "
                         f"{LIMITS['n_layer']} layers")
    return last + 1


def prefixed(keymap: KeyMap, prefix: str, outside: tuple[str, ...] = ()) -> KeyMap:
    """Put `prefix` before every checkpoint name except those starting with `outside` (heads
    that live beside the base model, e.g. 'cls.' or 'lm_head.')."""
    return [(core, ckpt if ckpt.startswith(outside) and outside else prefix + ckpt, transform)
            for core, ckpt, transform in keymap]


class AddOne(Transform):
    """Gemma's RMSNorm multiplies by (1 + weight): store the effective gain once, at load
    (in float32, exactly as Hugging Face computes 1.0 + weight.float())."""

    def __call__(self, w):
        value = np.float32(1.0) + w
        value.flags.writeable = False
        return value


ADD_ONE = AddOne()
