"""How far an intervened trace is from the clean one, array by array and layer by layer: where
an intervention first bites and how it spreads.

For an array's clean value C and intervened value I, with Δ = I − C:

    relative = ‖Δ‖ / ‖C‖        (Frobenius norms)        max_abs = max |Δ|

over every position, and per position: a position's slice is the array at that token along
its position axis, the second-to-last one ([n_seq, d], [n_head, n_seq, d_head], and the query
rows of [n_head, n_q, n_k]). Entries masked in both (−∞ scores) count as equal, and so do the
raw scores a causal mask blocks (computed, never used). The arrays
compared are the ones the stepper's stages compute (`Stage.computes` in core/model/stages.py)."""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Mapping, Optional

import numpy as np

from ..model import stages as stages_lib
from ..trace.layer_detail import detail_nbytes
from ..model.config import ModelConfig


@dataclass(frozen=True)
class Difference:
    name: str
    layer: Optional[int]             # None: a whole-model array (embeddings, logits)
    relative: float                  # ‖Δ‖ / ‖clean‖ over every position
    max_abs: float                   # max |Δ| over every position
    relative_at: np.ndarray          # [n_seq] the same, per position
    max_abs_at: np.ndarray           # [n_seq]
    relative_per_head: Optional[np.ndarray] = None   # [n_head] for [n_head, n_seq, ·] arrays

    def at(self, position: Optional[int] = None) -> tuple[float, float]:
        """(relative, max_abs) at a position (None: over every position)."""
        if position is None:
            return self.relative, self.max_abs
        return float(self.relative_at[position]), float(self.max_abs_at[position])


Differences = Mapping[tuple[str, Optional[int]], Difference]


def norm_ratio(delta_sq: np.ndarray, clean_sq: np.ndarray) -> np.ndarray:
    # ‖Δ‖ / ‖C‖ from squared norms (float64 arrays); a zero clean norm gives 0 (nothing
    # moved) or inf. Called under np.errstate(divide="ignore", invalid="ignore")
    ratio = np.sqrt(delta_sq / clean_sq)
    ratio[delta_sq == 0] = 0.0
    return ratio


def _total_ratio(delta_sq: float, clean_sq: float) -> float:
    if delta_sq == 0:
        return 0.0
    return math.inf if clean_sq == 0 else math.sqrt(delta_sq / clean_sq)


QUIET = dict(divide="ignore", invalid="ignore", over="ignore")


def compare(name: str, layer: Optional[int], clean: np.ndarray, intervened: np.ndarray,
            ignore: Optional[np.ndarray] = None) -> Difference:
    """One array's difference: [..., n_seq, x] clean and intervened -> Difference; entries where
    `ignore` ([n_seq, x], e.g. the causal mask) is True count as equal and as zero."""
    with np.errstate(**QUIET):
        return _compare(name, layer, clean, intervened, ignore)[0]


def _compare(name: str, layer: Optional[int], clean: np.ndarray, intervened: np.ndarray,
             ignore: Optional[np.ndarray] = None, clean_sq: Optional[np.ndarray] = None):
    """-> (Difference, clean's squared norms [n_head or 1, n_seq] to pass as `clean_sq` the
    next time the same clean array is compared, or None). float32 arithmetic with float64
    totals: each array is read a few times, as the forward pass that wrote it did; where an
    infinity shows (a mask not given as `ignore`), the exact float64 way takes over."""
    if clean.shape != intervened.shape:
        where = name if layer is None else f"{name} of layer {layer}"
        raise ValueError(f"{where}: clean shape {clean.shape} and intervened shape {intervened.shape} differ")
    c, i = _heads(clean), _heads(intervened)                 # [n_head or 1, n_seq, x] views
    n_head, n_seq = c.shape[0], c.shape[1]
    if clean is intervened:                                 # the same array (a layer before the intervention)
        zeros = np.zeros(n_seq)
        return Difference(name, layer, 0.0, 0.0, zeros, zeros.copy(),
                          np.zeros(n_head) if clean.ndim == 3 else None), clean_sq
    delta = np.subtract(i, c)
    if ignore is not None:
        delta[:, ignore] = 0
    delta_sq = np.einsum("hix,hix->hi", delta, delta)              # [n_head, n_seq]
    if clean_sq is None:
        masked = c if ignore is None else np.where(ignore, 0, c)
        clean_sq = np.einsum("hix,hix->hi", masked, masked)
    if not (np.isfinite(delta_sq).all() and np.isfinite(clean_sq).all()):
        return _compare_exact(name, layer, clean, intervened, ignore), None
    np.abs(delta, out=delta)
    max_abs_at = delta.max(axis=2, initial=0.0).max(axis=0).astype(np.float64)
    rows_delta, rows_clean = delta_sq.sum(axis=0, dtype=np.float64), clean_sq.sum(axis=0, dtype=np.float64)
    per_head = None
    if clean.ndim == 3:
        per_head = norm_ratio(delta_sq.sum(axis=1, dtype=np.float64), clean_sq.sum(axis=1, dtype=np.float64))
    return Difference(name, layer, _total_ratio(float(rows_delta.sum()), float(rows_clean.sum())),
                      float(max_abs_at.max(initial=0.0)), norm_ratio(rows_delta, rows_clean), max_abs_at,
                      per_head), clean_sq


def _heads(array: np.ndarray) -> np.ndarray:
    # [n_seq] / [n_seq, x] / [n_head, n_seq, x] -> [n_head or 1, n_seq, x]
    if array.ndim == 1:
        return array.reshape(1, -1, 1)
    return array.reshape(-1, *array.shape[-2:])


def _compare_exact(name: str, layer: Optional[int], clean: np.ndarray, intervened: np.ndarray,
                   ignore: Optional[np.ndarray]) -> Difference:
    # float64 throughout, −∞ in both (masked scores) counted as equal, −∞ in one only as ∞
    with np.errstate(**QUIET):
        return _exact(name, layer, _heads(clean), _heads(intervened), ignore, clean.ndim == 3)


def _exact(name, layer, c, i, ignore, by_head: bool) -> Difference:
    if ignore is not None:
        c, i = np.where(ignore, 0, c), np.where(ignore, 0, i)
    delta = np.subtract(i, c, dtype=np.float64)
    bad = ~np.isfinite(delta)
    delta[bad] = np.where(c[bad] == i[bad], 0.0, np.inf)
    c = np.where(np.isfinite(c), c, 0).astype(np.float64)
    delta_sq, clean_sq = np.einsum("hix,hix->hi", delta, delta), np.einsum("hix,hix->hi", c, c)
    max_abs_at = np.abs(delta).max(axis=2, initial=0.0).max(axis=0)
    rows_delta, rows_clean = delta_sq.sum(axis=0), clean_sq.sum(axis=0)
    per_head = norm_ratio(delta_sq.sum(axis=1), clean_sq.sum(axis=1)) if by_head else None
    return Difference(name, layer, _total_ratio(float(rows_delta.sum()), float(rows_clean.sum())),
                      float(max_abs_at.max(initial=0.0)), norm_ratio(rows_delta, rows_clean), max_abs_at, per_head)


# clean trace -> {(name, layer): squared norms}: ticking another head compares with the same
# clean trace, whose norms need not be read again
_CLEAN_NORMS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def shown_arrays() -> tuple[str, ...]:
    """Every array a stage computes, in the order of the stages."""
    return tuple(dict.fromkeys(name for s in stages_lib.STAGES for name in s.computes))


def stage_differences(clean, intervened, names: Optional[tuple[str, ...]] = None
                      ) -> dict[tuple[str, Optional[int]], Difference]:
    """(array name, layer or None) -> Difference, for every array the stepper's stages compute
    (or `names`) that both traces have (a rotary model without positions has no rotation
    angles). Reads every layer's detail of both traces, one layer at a time (within their
    budgets)."""
    if clean.n_seq != intervened.n_seq:
        raise ValueError(f"the clean trace has {clean.n_seq} tokens, the intervened one {intervened.n_seq}")
    names = shown_arrays() if names is None else names
    blocked = clean.mask           # [n_q, n_k] the causal mask (None: none)
    norms = _CLEAN_NORMS.setdefault(clean, {})
    out: dict[tuple[str, Optional[int]], Difference] = {}

    def add(name: str, layer: Optional[int], c: np.ndarray, i: np.ndarray) -> None:
        ignore = blocked if name in ("scores_raw", "scores") else None
        d, clean_sq = _compare(name, layer, c, i, ignore, norms.get((name, layer)))
        if clean_sq is not None:
            norms[(name, layer)] = clean_sq
        out[(name, layer)] = d

    with np.errstate(**QUIET):
        for name in names:
            if name in clean.arrays and name in intervened.arrays:
                add(name, None, clean.arrays[name], intervened.arrays[name])
        if "logits" in names and clean.has_logits and intervened.has_logits:
            # made when read, not in `arrays`: compared a block of positions at a time
            out[("logits", None)] = _compare_logits(clean, intervened, norms)
        for layer in range(clean.config.n_layer):
            clean_detail, intervened_detail = clean.detail(layer), intervened.detail(layer)
            for name in names:
                if name in clean_detail and name in intervened_detail and clean_detail[name].size:
                    # (a dense layer of an MoE model keeps an empty router entry)
                    add(name, layer, clean_detail[name], intervened_detail[name])
    return out


LOGIT_BLOCK = 64              # positions of logits compared at a time (64 · n_vocab float64s)


def _compare_logits(clean, intervened, norms: dict) -> Difference:
    """The logits' Difference without either trace's whole [n_seq, n_vocab] array: the rows a
    block at a time, the change by one product (Trace.logits_change_at), totals in float64;
    the clean logits' norms once per clean trace."""
    n_seq = clean.n_seq
    delta_sq, max_abs_at = np.zeros(n_seq), np.zeros(n_seq)
    known = norms.get(("logits", None))
    clean_sq = np.zeros(n_seq) if known is None else known
    for first in range(0, n_seq, LOGIT_BLOCK):
        rows = slice(first, min(first + LOGIT_BLOCK, n_seq))
        delta = clean.logits_change_at(intervened, rows).astype(np.float64)
        delta[~np.isfinite(delta)] = np.inf            # an overflow is a change, not a number
        delta_sq[rows] = np.einsum("ix,ix->i", delta, delta)
        np.abs(delta, out=delta)
        max_abs_at[rows] = delta.max(axis=1, initial=0.0)
        if known is None:
            c = clean.logits_at(rows)
            c64 = np.where(np.isfinite(c), c, 0).astype(np.float64)
            clean_sq[rows] = np.einsum("ix,ix->i", c64, c64)
    norms[("logits", None)] = clean_sq
    return Difference("logits", None, _total_ratio(float(delta_sq.sum()), float(clean_sq.sum())),
                      float(max_abs_at.max(initial=0.0)), norm_ratio(delta_sq, clean_sq), max_abs_at)


@dataclass(frozen=True)
class StageGrid:
    """The differences as stages × layers: each cell the largest relative change among the
    arrays the stage computes at that layer. A stage that runs once (embedding, positions,
    prediction) has its one value in the column where it runs: layer 0's column for the stages
    before the layers, the last layer's for those after; NaN elsewhere."""
    stages: tuple[str, ...]                        # row: stage key
    values: np.ndarray                             # [n_rows, n_layer]
    cells: tuple[tuple[tuple[Difference, ...], ...], ...]   # [row][col] the stage's arrays there
    position: Optional[int]                        # the token (None: over every position)

    def largest(self, row: int, col: int) -> Optional[Difference]:
        """The array whose change the cell shows (None: the stage does not run there)."""
        cell = self.cells[row][col]
        if not cell:
            return None
        return max(cell, key=lambda d: d.at(self.position)[0])

    def most_changed_head(self, row: int, col: int) -> Optional[int]:
        """For a per-head array: the head whose slice changed most (over every position)."""
        d = self.largest(row, col)
        if d is None or d.relative_per_head is None or not np.any(d.relative_per_head > 0):
            return None
        return int(np.argmax(d.relative_per_head))


def stage_grid(differences: Differences, config: ModelConfig, position: Optional[int] = None,
               stage_list=None) -> StageGrid:
    """`stage_list`: the rows' stages in order (default: the config's available stages; an
    encoder–decoder's decoder adds Cross-attention)."""
    n_layer = config.n_layer
    first_layer_stage = min(s.number for s in stages_lib.STAGES if s.per_layer)
    rows, values, cells = [], [], []
    for s in (stages_lib.available_stages(config) if stage_list is None else stage_list):
        runs_at = 0 if s.number < first_layer_stage else n_layer - 1     # a stage that runs once
        row: list[tuple[Difference, ...]] = []
        for layer in range(n_layer):
            if not s.per_layer and layer != runs_at:
                row.append(())
                continue
            key_layer = layer if s.per_layer else None
            row.append(tuple(differences[(name, key_layer)] for name in s.computes
                             if (name, key_layer) in differences))
        if not any(row):
            continue
        rows.append(s.key)
        cells.append(tuple(row))
        values.append([max((d.at(position)[0] for d in cell), default=np.nan) for cell in row])
    grid = np.array(values, dtype=np.float64).reshape(len(rows), n_layer)
    return StageGrid(tuple(rows), grid, tuple(cells), position)


def intervene_and_compare(model, clean, interventions):
    """-> (the intervened trace of `clean`'s tokens, stage_differences(clean, it)). The
    differences read every layer's detail of both traces: the intervened pass records its
    layers as it runs when they fit the clean trace's budget (no second computation); the
    clean trace's are computed once and stay in its cache (the stepper reads them there too)."""
    n_layer = model.config.n_layer
    layer_bytes = detail_nbytes(clean.detail(0))
    eager = tuple(range(n_layer)) if layer_bytes * n_layer <= clean.cache.budget else ()
    intervened = model.intervene(clean, interventions, detail_layers=eager)
    return intervened, stage_differences(clean, intervened)
