"""The numbers each stage's and view's explanation quotes, computed here and tested with
hand-computed values; the views only format them (a view that computes is a view that can be
wrong untested). One readout per stage or view, named after it."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..model import measures
from ..model import ops
from .differences import norm_ratio

FIRST_DIMS = 8          # "the first dimensions" the position question is about


@dataclass(frozen=True)
class SoftmaxReadout:
    best_key: int            # the key the query weights most
    best_weight: float
    row_sum: float           # 1 up to rounding: the weights are a distribution
    entropy: float           # −Σ w log w, in nats
    uniform_entropy: float   # log(keys the query may see): the entropy of spreading evenly
    allowed: int             # keys the mask lets the query see


def softmax_readout(weights_row: np.ndarray, scores_row: np.ndarray) -> SoftmaxReadout:
    """One query's attention weights [n_keys] (NaN where masked is read as 0) and its scores
    (−inf where masked)."""
    weights = np.nan_to_num(np.asarray(weights_row, dtype=np.float64), nan=0.0)
    best = int(np.argmax(weights))
    positive = weights[weights > 0]
    allowed = int(np.count_nonzero(np.isfinite(scores_row)))
    return SoftmaxReadout(best, float(weights[best]), float(weights.sum()),
                          float(-(positive * np.log(positive)).sum()),
                          math.log(max(allowed, 1)), allowed)


@dataclass(frozen=True)
class PositionAdditionReadout:
    cos_selected: float      # cos(e_i, e_i + p_i (+ t_i)) of the selected token
    cos_mean: float          # ... averaged over the tokens
    cos_ep: float            # mean |cos(e_i, p_i)|: how aligned token and position rows are
    e_norm: float            # ‖e_i‖, ‖p_i‖ of the selected token
    p_norm: float
    p_dominates: int         # dimensions where p's RMS over the tokens exceeds e's
    first_dims_ratio: float  # RMS of p over RMS of e in the first FIRST_DIMS dimensions
    survival: str            # what the mean cosine says, in words


def survival_verdict(mean_cosine: float) -> str:
    if mean_cosine > 0.7:
        return "most of e survives in the sum"
    if mean_cosine > 0.45:
        return "e is still clearly there"
    return ("here p is much larger than e, so the sum points mostly along p; e is not lost, "
            "though: it lies in directions p hardly uses, and the first layer's weights can read "
            "it back out")


def position_addition_readout(e: np.ndarray, p: np.ndarray, total: np.ndarray,
                              selected: int) -> PositionAdditionReadout:
    """e, p [n_seq, d_model], total the sum the model forms (e + p, + t for BERT)."""
    cosines = measures.cosine_rows(e, total)
    e_rms, p_rms = measures.rms_per_dim(e), measures.rms_per_dim(p)
    mean = float(np.mean(cosines))
    return PositionAdditionReadout(
        float(cosines[selected]), mean, float(np.mean(np.abs(measures.cosine_rows(e, p)))),
        float(np.linalg.norm(e[selected])), float(np.linalg.norm(p[selected])),
        int(np.sum(p_rms > e_rms)),
        float(np.mean(p_rms[:FIRST_DIMS]) / max(float(np.mean(e_rms[:FIRST_DIMS])), 1e-12)),
        survival_verdict(mean))


@dataclass(frozen=True)
class OutputProjectionReadout:
    ratios: np.ndarray       # ‖attention output_i‖ / ‖x_i‖ per token: how much attention adds
    before: np.ndarray       # ‖norm input_i‖, ‖norm output_i‖ per token
    after: np.ndarray

    @property
    def mean_ratio(self) -> float:
        return float(np.mean(self.ratios))


def output_projection_readout(x: np.ndarray, attn_out: np.ndarray, norm_in: np.ndarray,
                              norm_out: np.ndarray) -> OutputProjectionReadout:
    """x the layer's input, attn_out its attention output [n_seq, d_model]; the norm that
    follows the residual (its input and output)."""
    ratios = np.linalg.norm(attn_out, axis=1) / np.maximum(np.linalg.norm(x, axis=1), 1e-12)
    return OutputProjectionReadout(ratios, np.linalg.norm(norm_in, axis=1), np.linalg.norm(norm_out, axis=1))


def movement(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """[k, d] vectors before and after an intervention -> [k]: ‖after − before‖ / ‖before‖
    (0 where nothing moved; the same measure as core/analysis/differences.py's stage differences)."""
    before64, after64 = before.astype(np.float64), after.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return norm_ratio(np.sum((after64 - before64) ** 2, axis=-1), np.sum(before64 ** 2, axis=-1))


@dataclass(frozen=True)
class PredictionChange:
    p_clean: np.ndarray      # next-token probabilities [n_vocab], clean and intervened
    p_after: np.ndarray
    gained: np.ndarray       # token ids by how much probability they gained, most first
    lost: np.ndarray         # ... and lost, most first

    @property
    def top_clean(self) -> int:
        return int(np.argmax(self.p_clean))

    @property
    def top_after(self) -> int:
        return int(np.argmax(self.p_after))


def prediction_change(clean_logits: np.ndarray, intervened_logits: np.ndarray, top: int) -> PredictionChange:
    """One position's logits [n_vocab], clean and intervened -> the `top` tokens that gained
    and lost the most probability."""
    p_clean = ops.softmax(clean_logits.astype(np.float32, copy=True))
    p_after = ops.softmax(intervened_logits.astype(np.float32, copy=True))
    order = np.argsort(p_after - p_clean, kind="stable")
    return PredictionChange(p_clean, p_after, order[::-1][:top], order[:top])


def echo_count(top_ids: np.ndarray, input_ids: np.ndarray, known: Optional[np.ndarray] = None) -> tuple[int, int]:
    """The logit lens's first row (the embedding output through the head): at how many of the
    positions computed so far (`known`, bool per position; None: all) its top token is the input
    token itself, and of how many. A tied head scores each token by its own embedding row, so
    this row mostly echoes the input."""
    top, ids = np.asarray(top_ids), np.asarray(input_ids)
    mask = np.ones(len(ids), dtype=bool) if known is None else np.asarray(known, dtype=bool)
    return int(np.count_nonzero((top == ids) & mask)), int(np.count_nonzero(mask))


@dataclass(frozen=True)
class Loop:
    start: int               # index in `ids` where the repeats begin
    period: int              # tokens in one repeat
    repeats: int             # whole repeats in a row


def recent_loop(ids, min_repeats: int = 3, max_period: int = 8, window: int = 32) -> Optional[Loop]:
    """A block of at most `max_period` tokens repeated at least `min_repeats` times in a row,
    ending within the last `window` of `ids` (generated token ids): what greedy decoding falls
    into on a small model ("mill mill mill", "the prince the prince the prince"). The run that
    ends latest, and of those the shortest period."""
    ids = [int(i) for i in ids]
    for end in range(len(ids), max(len(ids) - window, 0), -1):
        for period in range(1, max_period + 1):
            block = ids[end - period:end]
            repeats = 1
            while end - (repeats + 1) * period >= 0 and \
                    ids[end - (repeats + 1) * period:end - repeats * period] == block:
                repeats += 1
            if repeats >= min_repeats and len(block) == period:
                return Loop(end - repeats * period, period, repeats)
    return None
