"""What the round-3 decoders share: reading a config with transformers' defaults filled in,
per-layer attention kinds (layer_types, sliding_window_pattern, no_rope_layers), and keymaps
with norms on each branch's output (sandwich, branch_out)."""
from __future__ import annotations

from typing import Iterable, Optional

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import IDENTITY, KeyMap, integer

LAYER_TYPES = ("sliding_attention", "full_attention")


def with_defaults(cfg: dict, defaults: dict) -> dict:
    """cfg with transformers' config-class default for every key it lacks (an explicit null
    stays: for the soft-caps and the window it means "off", as in transformers)."""
    return {**defaults, **cfg}


def sliding_layers(cfg: dict, source: str, n_layer: int, default: Iterable[str]) -> tuple[int, ...]:
    """Indices of the layers whose layer_types entry is "sliding_attention" (config.json's
    list, else `default`, transformers' own rule for this family)."""
    kinds = cfg.get("layer_types")
    if kinds is None:
        kinds = list(default)
    if not isinstance(kinds, list) or len(kinds) != n_layer or any(k not in LAYER_TYPES for k in kinds):
        raise ModelError(f"{source}: layer_types must list {n_layer} of {', '.join(LAYER_TYPES)}, "
                         f"got {kinds!r}")
    return tuple(i for i, kind in enumerate(kinds) if kind == "sliding_attention")


def window_fields(cfg: dict, source: str, local: tuple[int, ...]) -> dict:
    """sliding_window + local_layers: no window (null) means no local layers."""
    if cfg.get("sliding_window") is None or not local:
        return {"sliding_window": 0, "local_layers": ()}
    return {"sliding_window": integer(cfg, "sliding_window", source), "local_layers": local}


def flag_list(cfg: dict, key: str, source: str, n_layer: int) -> Optional[list[int]]:
    """A per-layer list of 0/1 (SmolLM3's no_rope_layers), checked; None when absent."""
    values = cfg.get(key)
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != n_layer or any(v not in (0, 1) or type(v) is bool
                                                                     for v in values):
        raise ModelError(f"{source}: {key} must list {n_layer} values of 0 or 1, got {values!r}")
    return values


def branch_norm_keymap(keys: KeyMap, config: ModelConfig, post_attn: str, pre_mlp: Optional[str],
                       post_mlp: str, norm_transform=IDENTITY) -> KeyMap:
    """A Llama-layout keymap (decoder_keymap, names inside the base model) with the
    branch-output norms: ln_2 reads `pre_mlp` (Gemma 2/3's pre_feedforward_layernorm), or ln_1
    and ln_2 are dropped (OLMo 2: its only block norms are on the outputs); post_attn_ln and
    post_mlp_ln read `post_attn` and `post_mlp`."""
    out: KeyMap = []
    for core, ckpt, transform in keys:
        if core.startswith("h.") and core.endswith((".ln_1.g", ".ln_2.g")):
            if not config.norms_branch_input:
                continue
            if core.endswith(".ln_2.g"):
                ckpt = ckpt.rsplit(".", 2)[0] + f".{pre_mlp}.weight"
        out.append((core, ckpt, transform))
    for i in range(config.n_layer):
        out += [(f"h.{i}.post_attn_ln.g", f"layers.{i}.{post_attn}.weight", norm_transform),
                (f"h.{i}.post_mlp_ln.g", f"layers.{i}.{post_mlp}.weight", norm_transform)]
    return out
