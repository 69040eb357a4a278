"""The Recorder: what one forward pass keeps of what it computes (core/trace/trace.py makes the
Trace of it; core/trace/layer_detail.py derives what a recorded layer keeps as None)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .layer_detail import DERIVED, detail_nbytes


class Recorder:
    """Collects what forward() records, by reference: the forward pass allocates a fresh
    array for every intermediate, so keeping it costs nothing, where copying every layer
    into a stacked buffer would double the memory traffic of a trace.

    `per_layer` limits which per-layer names are kept (None: all of them), except in the
    layers whose detail is recorded, whose every intermediate is kept in `details`: the
    `detail_layers` (the layer a view will show first), and, with a `budget` (bytes), every
    layer from the first on while the detail recorded so far plus one more layer fits it
    (the pass records them instead of each being computed again when visited). A layer's
    size is estimated from the largest layer recorded so far; before the first one, from
    `first_estimate` (a lower bound: the n_head·n² arrays); a layer that turns out not to
    fit is dropped when the next one begins.

    `derive`: the names of layer_detail.DERIVED this model's pass makes; a recorded layer keeps
    them as None (derived when read: core/trace/layer_detail.py), takes k, v, k_unrotated per K/V
    head (`repeats_kv`), and keeps a rotary layer's q_unrotated, k_unrotated instead of q, k.
    The pass then computes its scores in place (keeps_scores is False). A requested layer over
    `per_head_over` bytes drops its weights when it ends (kept per head, as LayerCache would)."""

    def __init__(self, per_layer: Optional[tuple[str, ...]] = None,
                 detail_layers: tuple[int, ...] = (), budget: int = 0,
                 first_estimate: int = 0, derive: tuple[str, ...] = (), per_head_over: int = 0) -> None:
        if derive and per_layer is None:
            raise ValueError("a recorder keeping every layer's arrays derives none of them")
        self.keep = per_layer
        self.derive = derive
        self.repeats_kv = bool(derive)
        self.per_head_over = int(per_head_over)
        self.detail_layers = detail_layers
        self.budget = int(budget)
        self.first_estimate = int(first_estimate)
        self.arrays: dict[str, np.ndarray] = {}
        self.per_layer: dict[str, list[np.ndarray]] = {}
        self.details: dict[int, dict[str, np.ndarray]] = {i: {} for i in detail_layers}
        self._current: Optional[int] = None
        self._full = False                # the budget is spent: no more layers recorded

    def _enter(self, layer: int) -> None:
        """A layer begins: drop the last one if it did not fit, decide whether to record this one."""
        if layer == self._current:
            return
        self._settle()
        self._current = layer
        if self.keep is None or self._full or self.budget <= 0 or layer in self.details:
            return
        done = [d for i, d in self.details.items() if d]
        estimate = max([detail_nbytes(d) for d in done] + [self.first_estimate])
        pending = sum(1 for i in self.detail_layers if i > layer)   # requested, still to come
        if sum(detail_nbytes(d) for d in done) + estimate * (1 + pending) <= self.budget:
            self.details[layer] = {}
        else:
            self._full = True

    def _settle(self) -> None:
        previous = self._current
        if previous is None or previous not in self.details:
            return
        if previous in self.detail_layers:
            detail = self.details[previous]
            if (self.derive and self.per_head_over and detail.get("attn_weights") is not None
                    and detail_nbytes(detail) > self.per_head_over):
                detail["attn_weights"] = None     # kept per head: each head's when read
            return
        if sum(detail_nbytes(d) for d in self.details.values()) > self.budget:
            del self.details[previous]    # larger than estimated: computed on demand instead
            self._full = True

    def keeps_scores(self, layer: int) -> bool:
        self._enter(layer)
        return self.keep is None or (layer in self.details and not self.derive)

    def __call__(self, name: str, value: np.ndarray, layer: Optional[int] = None) -> None:
        if layer is None:
            self.arrays[name] = value
            return
        self._enter(layer)
        if layer in self.details:
            detail = self.details[layer]
            if self.derive and name in DERIVED:         # at scores_raw: each derived name's place
                for derived in self.derive:
                    detail.setdefault(derived, None)
            elif self.derive and name in ("q", "k") and _same_shape(detail.get(name + "_unrotated"), value):
                detail[name] = None                     # rotate(q_unrotated) when read
            else:
                detail[name] = value
        if self.keep is None or name in self.keep:
            self.per_layer.setdefault(name, []).append(value)

    def recorded(self) -> dict[int, dict[str, np.ndarray]]:
        """The recorded layers' detail, the requested layers last (kept first under the budget)."""
        self._settle()
        self._current = None
        extra = {i: d for i, d in self.details.items() if i not in self.detail_layers and d}
        return {**extra, **{i: self.details[i] for i in self.detail_layers if self.details.get(i)}}

    def finish(self) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, ...]]]:
        """-> (whole-model arrays, per-layer arrays), all frozen read-only."""
        for value in [*self.arrays.values(), *(v for vs in self.per_layer.values() for v in vs)]:
            value.flags.writeable = False
        return dict(self.arrays), {name: tuple(values) for name, values in self.per_layer.items()}


def _same_shape(a: Optional[np.ndarray], b: np.ndarray) -> bool:
    return a is not None and a.shape == b.shape
