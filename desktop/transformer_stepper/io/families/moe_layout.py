"""What the mixture-of-experts families share (core/model/moe.py computes them): reading the router's
config keys, and the key map of a layer's router, experts and shared expert in place of the
dense feed-forward's."""
from __future__ import annotations

from typing import Iterable, Optional

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import TRANSPOSE, KeyMap, flag, integer


def renamed(cfg: dict, alias: str, key: str, source: str) -> dict:
    """cfg with `alias` spelt `key` (transformers' attribute_map: a Qwen3-MoE config saved by
    transformers 5 says num_local_experts where the released one says num_experts)."""
    if alias not in cfg:
        return cfg
    if key in cfg and cfg[key] != cfg[alias]:
        raise ModelError(f"{source}: {key}={cfg[key]!r} and {alias}={cfg[alias]!r} disagree")
    cfg = dict(cfg)
    cfg[key] = cfg.pop(alias)
    return cfg


def dense_layers(cfg: dict, source: str, n_layer: int) -> tuple[int, ...]:
    """Layers with the dense feed-forward, as transformers' Qwen2-MoE / Qwen3-MoE decide:
    those in mlp_only_layers, and those where (layer + 1) % decoder_sparse_step != 0."""
    only = cfg.get("mlp_only_layers")
    only = [] if only is None else only
    if not isinstance(only, list) or any(type(i) is not int or not 0 <= i < n_layer for i in only):
        raise ModelError(f"{source}: mlp_only_layers must list layer indices below {n_layer}, got {only!r}")
    step = integer(cfg, "decoder_sparse_step", source, 1)
    return tuple(i for i in range(n_layer) if i in only or (i + 1) % step)


def expert_fields(cfg: dict, source: str, experts_key: str, width_key: str,
                  norm_topk: Optional[bool] = None, dense: tuple[int, ...] = (),
                  shared_key: str = "") -> dict:
    """ModelConfig's n_expert, n_expert_used, d_expert, norm_topk, dense_layers, d_shared_expert."""
    n_expert = integer(cfg, experts_key, source)
    used = integer(cfg, "num_experts_per_tok", source)
    if used > n_expert:
        raise ModelError(f"{source}: num_experts_per_tok={used} is more than {experts_key}={n_expert}")
    return dict(n_expert=n_expert, n_expert_used=used, d_expert=integer(cfg, width_key, source),
                norm_topk=flag(cfg, "norm_topk_prob", source, False) if norm_topk is None else norm_topk,
                dense_layers=dense,
                d_shared_expert=integer(cfg, shared_key, source) if shared_key else 0)


def moe_keymap(keys: KeyMap, config: ModelConfig, block: str, router: str, expert: str,
               projections: tuple[str, str, str], shared: str = "", shared_gate: str = "") -> KeyMap:
    """A Llama-layout keymap (names inside the base model) with each MoE layer's mlp.* entries
    replaced by its router (`{block}{router}`), experts (`{block}{expert}` with {e}, then
    gate/up/down `projections`) and shared expert. Every weight is [out, in] in the file."""
    moe = [i for i in range(config.n_layer) if config.is_moe_layer(i)]
    dropped = tuple(f"h.{i}.mlp." for i in moe)
    out: KeyMap = [entry for entry in keys if not entry[0].startswith(dropped)]
    for i in moe:
        p, core = f"layers.{i}.{block}", f"h.{i}.moe."
        out.append((core + "router.w", p + router + ".weight", TRANSPOSE))
        for e in range(config.n_expert):
            out += _expert(core + f"expert.{e}.", p + expert.format(e=e) + ".", projections)
        if config.d_shared_expert:
            out += _expert(core + "shared.", p + shared + ".", projections)
            if config.shared_expert_gate:
                out.append((core + "shared_gate.w", p + shared_gate + ".weight", TRANSPOSE))
    return out


def _expert(core: str, ckpt: str, projections: Iterable[str]) -> KeyMap:
    return [(core + name + ".w", ckpt + projection + ".weight", TRANSPOSE)
            for name, projection in zip(("gate", "up", "proj"), projections)]


def detect_experts(names: set[str], router: str, expert_part: str) -> bool:
    """Tensor names with this layout's router and experts."""
    return any(n.endswith(router + ".weight") for n in names) and any(expert_part in n for n in names)


def needs_config(family: str) -> ModelError:
    return ModelError(f"a {family} checkpoint without its config.json: the experts' top-k and "
                      f"rope_theta are not in the tensors; put the model's config.json beside the file")
