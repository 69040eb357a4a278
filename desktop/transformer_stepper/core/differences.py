"""How far an intervened trace is from the clean one, array by array and layer by layer: where
an intervention first bites and how it spreads.

For an array's clean value C and intervened value I, with Δ = I − C:

    relative = ‖Δ‖ / ‖C‖        (Frobenius norms)        max_abs = max |Δ|

over every position, and per position: a position's slice is the array at that token along
its position axis, the second-to-last one ([n_seq, d], [n_head, n_seq, d_head], and the query
rows of [n_head, n_q, n_k]). Entries masked in both (−∞ scores) count as equal, and so do the
raw scores a causal mask blocks (computed, never used). The arrays
compared are the ones the stepper's stages compute (`Stage.arrays` in core/stages.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

import numpy as np

from . import stages as stages_lib
from .config import ModelConfig


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


def _ratio(delta_sq, clean_sq):
    # ‖Δ‖ / ‖C‖ from squared norms; a zero clean norm gives 0 (nothing moved) or inf
    delta_sq, clean_sq = np.asarray(delta_sq, np.float64), np.asarray(clean_sq, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.sqrt(delta_sq / clean_sq)
    return np.where(delta_sq == 0, 0.0, np.where(clean_sq == 0, np.inf, ratio))


def compare(name: str, layer: Optional[int], clean: np.ndarray, intervened: np.ndarray,
            ignore: Optional[np.ndarray] = None) -> Difference:
    """One array's difference: [..., n_seq, x] clean and intervened -> Difference; entries where
    `ignore` (broadcast to the array) is True count as equal and as zero."""
    if clean.shape != intervened.shape:
        where = name if layer is None else f"{name} of layer {layer}"
        raise ValueError(f"{where}: clean shape {clean.shape} and intervened shape {intervened.shape} differ")
    if clean.ndim == 1:
        clean, intervened = clean[:, None], intervened[:, None]
    if np.isfinite(clean).all() and np.isfinite(intervened).all():
        delta = intervened.astype(np.float64) - clean
    else:
        with np.errstate(invalid="ignore"):
            delta = intervened.astype(np.float64) - clean
            delta = np.where(clean == intervened, 0.0, delta)          # −∞ in both: equal
            delta = np.where(np.isnan(delta), np.inf, delta)           # masked in one only
        clean = np.where(np.isfinite(clean), clean, 0)
    if ignore is not None:
        delta = np.where(ignore, 0.0, delta)
        clean = np.where(ignore, 0, clean)
    per_position = np.moveaxis(delta, -2, 0).reshape(delta.shape[-2], -1)      # [n_seq, ...]
    clean_per_position = np.moveaxis(clean, -2, 0).reshape(clean.shape[-2], -1)
    delta_sq = np.einsum("ij,ij->i", per_position, per_position)
    clean_sq = np.einsum("ij,ij->i", clean_per_position, clean_per_position, dtype=np.float64)
    max_abs_at = np.abs(per_position).max(axis=1)
    per_head = None
    if delta.ndim == 3:
        per_head = _ratio(np.einsum("hij,hij->h", delta, delta),
                          np.einsum("hij,hij->h", clean, clean, dtype=np.float64))
    return Difference(name, layer, float(_ratio(delta_sq.sum(), clean_sq.sum())),
                      float(max_abs_at.max(initial=0.0)), _ratio(delta_sq, clean_sq), max_abs_at,
                      per_head)


def shown_arrays() -> tuple[str, ...]:
    """Every array a stage computes, in the order of the stages."""
    return tuple(dict.fromkeys(name for s in stages_lib.STAGES for name in s.arrays))


def stage_differences(clean, intervened) -> dict[tuple[str, Optional[int]], Difference]:
    """(array name, layer or None) -> Difference, for every array the stepper's stages compute
    that both traces have (a rotary model without positions has no rotation angles). Reads every
    layer's detail of both traces, one layer at a time (within their budgets)."""
    if clean.n_seq != intervened.n_seq:
        raise ValueError(f"the clean trace has {clean.n_seq} tokens, the intervened one {intervened.n_seq}")
    names = shown_arrays()
    blocked = clean.mask           # [n_q, n_k] the causal mask (None: none)
    out: dict[tuple[str, Optional[int]], Difference] = {}
    for name in names:
        if name in clean.arrays and name in intervened.arrays:
            out[(name, None)] = compare(name, None, clean.arrays[name], intervened.arrays[name])
    for layer in range(clean.config.n_layer):
        clean_detail, intervened_detail = clean.detail(layer), intervened.detail(layer)
        for name in names:
            if name in clean_detail and name in intervened_detail:
                ignore = blocked if name == "scores_raw" else None
                out[(name, layer)] = compare(name, layer, clean_detail[name], intervened_detail[name], ignore)
    return out


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


def stage_grid(differences: Differences, config: ModelConfig, position: Optional[int] = None) -> StageGrid:
    n_layer = config.n_layer
    first_layer_stage = min(s.number for s in stages_lib.STAGES if s.per_layer)
    rows, values, cells = [], [], []
    for s in stages_lib.available_stages(config):
        runs_at = 0 if s.number < first_layer_stage else n_layer - 1     # a stage that runs once
        row: list[tuple[Difference, ...]] = []
        for layer in range(n_layer):
            if not s.per_layer and layer != runs_at:
                row.append(())
                continue
            key_layer = layer if s.per_layer else None
            row.append(tuple(differences[(name, key_layer)] for name in s.arrays
                             if (name, key_layer) in differences))
        if not any(row):
            continue
        rows.append(s.key)
        cells.append(tuple(row))
        values.append([max((d.at(position)[0] for d in cell), default=np.nan) for cell in row])
    grid = np.array(values, dtype=np.float64).reshape(len(rows), n_layer)
    return StageGrid(tuple(rows), grid, tuple(cells), position)
