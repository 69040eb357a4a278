"""Rotary settings from config.json, for every rotary family, as transformers reads them
(configuration_utils' RotaryEmbeddingConfigMixin, modeling_rope_utils):

- rope_theta: rope_parameters.rope_theta, else the top-level rope_theta (GPT-NeoX:
  rotary_emb_base), else 10000.
- partial rotary: rope_parameters.partial_rotary_factor, else the top-level key (GPT-NeoX:
  rotary_pct, default 0.25); the rotated width is int(head_dim · factor).
- rope_scaling (transformers 4) or rope_parameters (5): type from rope_type or type.
  linear, llama3, dynamic, yarn, longrope ("su" is longrope; Phi-3 also reads "yarn" as longrope).
- original_max_position_embeddings (llama3, yarn, longrope): the top-level key when the config
  has one (Phi-3's class always has it, default 4096), else the rope dict's, else
  max_position_embeddings.
- factor: required for linear, dynamic, llama3; yarn and longrope default it to
  max_position_embeddings / original_max_position_embeddings.
- attention factor: yarn's attention_factor, else from mscale/mscale_all_dim, else
  0.1·ln(factor) + 1 (1 when factor <= 1); longrope's attention_factor, else
  sqrt(1 + ln(factor) / ln(original)) (1 when factor <= 1).
- yarn: beta_fast (32), beta_slow (1), truncate (true).
- dynamic: the base grows past max_position_embeddings; the app lets a text run to
  max_position_embeddings · factor (transformers sets no limit)."""
from __future__ import annotations

import math

from ...core.model.errors import ModelError
from .common import integer, number

SUPPORTED = ("linear", "llama3", "dynamic", "yarn", "longrope")


def _scaling_dict(cfg: dict, source: str):
    params = cfg.get("rope_parameters")
    scaling = cfg.get("rope_scaling")
    if isinstance(params, dict) and scaling is None:
        scaling = params
    if scaling is not None and not isinstance(scaling, dict):
        raise ModelError(f"{source}: rope_scaling must be an object or null, got {scaling!r}")
    return params if isinstance(params, dict) else {}, scaling or {}


def _theta(cfg: dict, params: dict, source: str, theta_key: str) -> float:
    theta = params.get("rope_theta")
    if theta is None:
        theta = cfg.get(theta_key, cfg.get("rope_theta"))
    return number({"rope_theta": theta}, "rope_theta", source, 10000.0, positive=True)


def rotary_width(cfg: dict, scaling: dict, source: str, d_head: int, partial_key: str,
                 partial_default: float) -> int:
    partial = scaling.get("partial_rotary_factor")
    if partial is None:
        partial = cfg.get(partial_key, cfg.get("partial_rotary_factor"))
    if partial is None:
        partial = partial_default
    if type(partial) not in (int, float) or not 0 < partial <= 1:
        raise ModelError(f"{source}: {partial_key} must be a number in (0, 1], got {partial!r}")
    width = int(d_head * partial)
    if width < 2 or width % 2:
        raise ModelError(f"{source}: {partial_key}={partial!r} rotates {width} of {d_head} dims; "
                         f"an even number of at least 2 is needed")
    return 0 if width == d_head else width


def rope_fields(cfg: dict, source: str, d_head: int, n_ctx: int, theta_key: str = "rope_theta",
                partial_key: str = "partial_rotary_factor", partial_default: float = 1.0,
                model_type: str = "") -> dict:
    """-> ModelConfig fields: rope_theta, rotary_dim, rope_scaling and its parameters, and
    n_ctx when the scaling lengthens the context (dynamic)."""
    params, scaling = _scaling_dict(cfg, source)
    fields: dict = {"rope_theta": _theta(cfg, params, source, theta_key)}
    fields["rotary_dim"] = rotary_width(cfg, scaling or params, source, d_head, partial_key,
                                        partial_default)
    d_rotary = fields["rotary_dim"] or d_head
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "su" or (model_type == "phi3" and kind == "yarn"):
        kind = "longrope"
    if kind == "default":
        return fields
    if kind not in SUPPORTED:
        raise ModelError(f"{source}: unsupported rope_scaling type {kind!r} "
                         f"(supported: {', '.join(SUPPORTED)})")
    fields["rope_scaling"] = kind
    if kind in ("llama3", "yarn", "longrope"):
        top = cfg.get("original_max_position_embeddings")
        if top is None and model_type == "phi3":
            top = 4096                       # Phi3Config's class default, which wins over the dict
        where = {"original_max_position_embeddings": top} if top is not None else scaling
        fields["rope_original_n_ctx"] = integer(where, "original_max_position_embeddings", source, n_ctx)
    if kind in ("linear", "dynamic", "llama3"):
        fields["rope_factor"] = number(scaling, "factor", source, None, positive=True)
    else:
        default = n_ctx / fields["rope_original_n_ctx"]
        fields["rope_factor"] = number(scaling, "factor", source, default, positive=True)
    if kind == "llama3":
        fields.update(
            rope_low_freq_factor=number(scaling, "low_freq_factor", source, 1.0, positive=True),
            rope_high_freq_factor=number(scaling, "high_freq_factor", source, 4.0, positive=True))
        if fields["rope_high_freq_factor"] <= fields["rope_low_freq_factor"]:
            raise ModelError(f"{source}: rope_scaling high_freq_factor must exceed low_freq_factor")
    elif kind == "dynamic":
        fields.update(rope_original_n_ctx=n_ctx, n_ctx=int(n_ctx * max(fields["rope_factor"], 1.0)))
    elif kind == "yarn":
        fields.update(_yarn(scaling, source, fields["rope_factor"]))
    elif kind == "longrope":
        fields.update(_longrope(scaling, source, fields["rope_factor"], fields["rope_original_n_ctx"], d_rotary))
    return fields


def _yarn(scaling: dict, source: str, factor: float) -> dict:
    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = scaling.get("attention_factor")
    if attention is None:
        m, m_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
        attention = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
    truncate = scaling.get("truncate", True)
    if type(truncate) is not bool:
        raise ModelError(f"{source}: rope_scaling truncate must be true or false, got {truncate!r}")
    return dict(rope_attention_factor=number({"attention_factor": attention}, "attention_factor", source, 1.0),
                rope_beta_fast=float(scaling.get("beta_fast") or 32),
                rope_beta_slow=float(scaling.get("beta_slow") or 1), rope_truncate=truncate)


def _longrope(scaling: dict, source: str, factor: float, original: int, d_rotary: int) -> dict:
    fields = {}
    for key in ("short_factor", "long_factor"):
        value = scaling.get(key)
        if (not isinstance(value, list) or len(value) != d_rotary // 2
                or any(type(f) not in (int, float) for f in value)):
            raise ModelError(f"{source}: rope_scaling {key} must be a list of {d_rotary // 2} numbers "
                             f"(one per rotated pair), got {value!r:.80}")
        fields[f"rope_{key}"] = tuple(float(f) for f in value)
    attention = scaling.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    fields["rope_attention_factor"] = number({"attention_factor": attention}, "attention_factor", source, 1.0)
    return fields
