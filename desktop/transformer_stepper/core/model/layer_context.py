"""What every layer's attention needs besides its input: the additive mask and, for rotary
models, cos and sin of every position's angles; per layer, a local layer's window and rope
base (Gemma 2/3) and no rotation on a NoPE layer (SmolLM3)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from . import interventions as interventions_lib
from . import ops
from .config import ModelConfig
from .rotary import rope_cos_sin, rope_frequencies

Recorder = Optional[Callable[[str, np.ndarray, Optional[int]], None]]


@dataclass(frozen=True)
class Context:
    """What every layer's attention needs besides its input: the additive mask (0 / -inf, or
    None) and, for rotary models, cos and sin of every position's angles [n_seq, d_rotary // 2].
    A model whose layers differ (local_layers: Gemma 2/3) has the local layers' own in `local`;
    layer_context picks a layer's."""
    mask: Optional[np.ndarray]
    cos: Optional[np.ndarray] = None
    sin: Optional[np.ndarray] = None
    interventions: tuple = ()          # core/model/interventions.py: what this pass changes
    local: Optional["Context"] = None  # the local layers' mask (window) and angles (local base)
    scale: Optional[float] = None      # what scores are multiplied by (None: 1/√d_head; T5: 1)


def attention_mask(config: ModelConfig, n_seq: int, start: int = 0,
                   local: bool = False) -> Optional[np.ndarray]:
    # -> [n_seq - start, n_seq] additive (0 where a query may look, -inf where not), or None (no
    # mask): the rows of queries start.. (all of them unless extending a cached text).
    # The additive form is one broadcast add instead of a boolean scatter. With local_layers
    # the window is the local layers' (local=True) only; else every layer's.
    if not config.causal:
        return None
    window = config.sliding_window if local or not config.local_layers else 0
    if window and window < n_seq:
        blocked = ops.windowed_causal_mask(n_seq, window)
    else:
        blocked = ops.causal_mask(n_seq)
    return ops.additive_mask(blocked[start:])


def context(config: ModelConfig, n_seq: int, record: Recorder = None, start: int = 0,
            interventions: tuple = ()) -> Context:
    """For queries at positions start..n_seq-1 over keys 0..n_seq-1 (start > 0: extending a
    text whose earlier keys and values are cached)."""
    mask = attention_mask(config, n_seq, start)
    local = _local_context(config, n_seq, record, start, interventions) if config.local_layers else None
    if config.position != "rotary" or interventions_lib.no_positions(interventions):
        return Context(mask, interventions=interventions, local=local)
    angles = _angles(config, n_seq, start, interventions, local=False)
    if record is not None:
        record("rope_angles", angles, None)
    return Context(mask, *rope_cos_sin(config, angles), interventions, local)


def _angles(config: ModelConfig, n_seq: int, start: int, interventions: tuple, local: bool) -> np.ndarray:
    # [n_seq - start, d_rotary // 2]: the rotation angles of positions start.. (as permuted)
    angles = ops.rope_angles(n_seq, rope_frequencies(config, n_seq, local))[start:]
    order = interventions_lib.position_order(interventions, n_seq)
    return angles if order is None else angles[order]


def _local_context(config: ModelConfig, n_seq: int, record, start: int, interventions: tuple) -> Context:
    # the local layers' mask (their window) and angles (their rope base, when it differs)
    mask = attention_mask(config, n_seq, start, local=True)
    if config.position != "rotary" or interventions_lib.no_positions(interventions):
        return Context(mask, interventions=interventions)
    angles = _angles(config, n_seq, start, interventions, local=True)
    if record is not None and config.rope_local_theta:
        record("rope_angles_local", angles, None)
    return Context(mask, *rope_cos_sin(config, angles), interventions)


def layer_context(config: ModelConfig, ctx: Context, layer: int) -> Context:
    """The mask and angles this layer uses: a local layer's window and rope base (Gemma 2/3),
    no rotation on a NoPE layer (SmolLM3); ctx itself where every layer is alike."""
    if ctx.local is not None and config.is_local(layer):
        ctx = ctx.local
    if ctx.cos is not None and not config.has_rope(layer):
        ctx = dataclasses.replace(ctx, cos=None, sin=None)
    return ctx
