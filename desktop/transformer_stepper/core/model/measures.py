"""Measures the views compute from a trace: cosines, nearest rows, a 2-D projection, where two
curves part. Small pure functions over numpy arrays (no Qt, no trace, no file formats); they
never write to their inputs (trace arrays are read-only)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import ops
from .config import ModelConfig
from .rotary import rope_cos_sin, rope_frequencies, turn

_TINY = 1e-12


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # [n, d], [n, d] -> [n]: cosine of each row of a with the same row of b (in their dtype)
    num = np.einsum("nd,nd->n", a, b)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return num / np.maximum(den, _TINY)


def cosine_matrix(x: np.ndarray) -> np.ndarray:
    # [n, d] -> [n, n]
    unit = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), _TINY)
    return unit @ unit.T


def unit_rows(x: np.ndarray) -> np.ndarray:
    # [n, d] -> [n, d] float64, each row scaled to length 1 (a zero row stays zero)
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), _TINY)


def nearest_rows(table: np.ndarray, row_norms: np.ndarray, vector: np.ndarray, k: int):
    """The k rows of `table` [n_vocab, d] most cosine-similar to `vector` [d]:
    (indices [k], cosines [k]), best first."""
    cosines = (table @ vector) / np.maximum(row_norms * np.linalg.norm(vector), _TINY)
    k = min(k, len(cosines))
    top = np.argpartition(-cosines, k - 1)[:k]
    top = top[np.argsort(-cosines[top])]
    return top, cosines[top]


def nearest_in_pool(pool: np.ndarray, queries: np.ndarray, k: int,
                    excluded: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """For each query [m, d], the k rows of `pool` [n, d] with the largest cosine, best first,
    skipping pool rows where `excluded` [m, n] is True. -> (indices [m, k], cosines [m, k]);
    a query with fewer than k candidates is padded with index -1 and cosine NaN. Ties go to
    the lower index (stable)."""
    cosines = unit_rows(queries) @ unit_rows(pool).T                 # [m, n]
    if excluded is not None:
        cosines = np.where(excluded, -np.inf, cosines)
    k_found = min(k, cosines.shape[1])
    order = np.argsort(-cosines, axis=1, kind="stable")[:, :k_found]  # [m, k]
    best = np.take_along_axis(cosines, order, axis=1)
    indices = np.full((len(queries), k), -1, dtype=np.int64)
    values = np.full((len(queries), k), np.nan)
    found = np.isfinite(best)
    indices[:, :k_found] = np.where(found, order, -1)
    values[:, :k_found] = np.where(found, best, np.nan)
    return indices, values


def principal_axes(x: np.ndarray, k: int = 2, iterations: int = 4,
                   oversample: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PCA of the rows of x [n, d]: (mean [d], axes [k, d] orthonormal, explained [k] fraction of
    the total variance), the largest first. Each axis is signed so that its largest-magnitude
    loading is positive (a deterministic choice; PCA itself has none).

    Small problems are solved exactly (eigh of the smaller Gram matrix); larger ones by
    subspace iteration from a fixed start (a few thin products instead of an n x n
    eigendecomposition: 240 tokens x 384 dims take about 1 ms instead of 6)."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    mean = x.mean(axis=0)
    centred = x - mean
    total = float(np.einsum("nd,nd->", centred, centred))
    k_found = min(k, n, d)
    axes = np.zeros((k, d))
    explained = np.zeros(k)
    if k_found == 0 or total <= _TINY:
        return mean, axes, explained
    width = k_found + oversample
    if min(n, d) <= 2 * width:
        if n <= d:
            values, vectors = np.linalg.eigh(centred @ centred.T)       # [n], [n, n]
            top = vectors[:, ::-1][:, :k_found]
            found = centred.T @ top                                     # [d, k]
        else:
            values, found = np.linalg.eigh(centred.T @ centred)
            found = found[:, ::-1][:, :k_found]
    else:
        # start from the rows of largest norm: a deterministic block that spans the spread
        start = centred[np.argsort(-np.einsum("nd,nd->n", centred, centred), kind="stable")[:width]]
        basis, _ = np.linalg.qr(start.T)                                # [d, width]
        for _ in range(iterations):
            basis, _ = np.linalg.qr(centred.T @ (centred @ basis))
        small = centred @ basis                                         # [n, width]
        values, rotation = np.linalg.eigh(small.T @ small)
        found = basis @ rotation[:, ::-1][:, :k_found]                  # [d, k]
    found /= np.maximum(np.linalg.norm(found, axis=0, keepdims=True), _TINY)
    signs = np.sign(found[np.argmax(np.abs(found), axis=0), np.arange(k_found)])
    found *= np.where(signs == 0, 1.0, signs)
    axes[:k_found] = found.T
    projected = centred @ found
    variance = np.einsum("nk,nk->k", projected, projected)
    explained[:k_found] = variance / total
    return mean, axes, explained


def project(x: np.ndarray, mean: np.ndarray, axes: np.ndarray) -> np.ndarray:
    # [n, d], [d], [k, d] -> [n, k]
    return (np.asarray(x, dtype=np.float64) - mean) @ axes.T


def align_signs(coords: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Flip columns of coords [n, k] that point against the same column of previous [n, k]
    (the same points in an earlier projection), so consecutive maps keep their orientation.
    -> the signs [k] (+1 or -1) to multiply by."""
    agreement = np.einsum("nk,nk->k", coords, previous)
    return np.where(agreement < 0, -1.0, 1.0)


def parting_index(cosines: np.ndarray, margin: float) -> Optional[int]:
    """The first index i >= 1 where cosines[i] is below cosines[0] by more than `margin`: where
    two vectors that started at cosines[0] separate. None if they never do."""
    below = np.flatnonzero(np.asarray(cosines[1:]) < cosines[0] - margin)
    return int(below[0]) + 1 if below.size else None


def largest_drop(cosines: np.ndarray) -> tuple[int, float]:
    """(i, cosines[i-1] - cosines[i]) for the step i >= 1 with the largest fall."""
    steps = np.asarray(cosines[:-1]) - np.asarray(cosines[1:])
    i = int(np.argmax(steps)) if steps.size else 0
    return i + 1, float(steps[i]) if steps.size else 0.0


# -- rotary positions: what the stepper's position stages plot ------------------------------
def rotated_at(config: ModelConfig, vector: np.ndarray, positions: np.ndarray) -> np.ndarray:
    # [d_head] unrotated, [m] positions -> [m, d_head]: the vector as RoPE turns it at each position
    # (partial rotary: the dims from d_rotary on stay as they are; yarn/longrope: × their factor)
    angles = np.asarray(positions, dtype=np.float32)[:, None] * rope_frequencies(config)[None, :]
    return turn(config, np.broadcast_to(vector, (len(positions), len(vector)))[None],
                *rope_cos_sin(config, angles))[0]


def rope_shift_scores(config: ModelConfig, q: np.ndarray, k: np.ndarray, query_pos: int,
                      key_pos: int, shifts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One query/key pair (unrotated [d_head] each) scored as q·k/√d_head after rotation,
    -> (both moved by each shift: constant, as RoPE depends only on query_pos - key_pos;
        only the key moved by each shift: changes with the distance)."""
    shifts = np.asarray(shifts)
    scale = np.float32(1.0 / np.sqrt(config.d_head))
    q_moved = rotated_at(config, q, query_pos + shifts)
    k_moved = rotated_at(config, k, key_pos + shifts)
    k_still_q = rotated_at(config, q, np.full(len(shifts), query_pos))
    together = np.einsum("md,md->m", q_moved, k_moved) * scale
    key_only = np.einsum("md,md->m", k_still_q, k_moved) * scale
    return together.astype(np.float32), key_only.astype(np.float32)


def wavelengths(frequencies: np.ndarray) -> np.ndarray:
    # [pairs] radians per position -> positions per full turn
    return (2 * np.pi / frequencies.astype(np.float64)).astype(np.float32)


def wrapped(angles: np.ndarray) -> np.ndarray:
    # radians -> (-π, π]: where on the circle each pair points
    return (np.angle(np.exp(1j * angles.astype(np.float64)))).astype(np.float32)


def pair_arrows(before: np.ndarray, after: np.ndarray, pairs: list[int],
                half: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """[d_head] vectors -> for each pair index i, ((x, y) before, (x, y) after) with
    x = v[i], y = v[i + half] (Hugging Face's rotate_half pairing; half = d_rotary / 2, by
    default d_head / 2: partial rotary pairs only the first d_rotary dims)."""
    half = half or len(before) // 2
    return [(np.array([before[i], before[i + half]]), np.array([after[i], after[i + half]])) for i in pairs]


def shown_pairs(n_pairs: int, count: int = 4) -> list[int]:
    """A few rotated pairs from fast (0) to slow (the last)."""
    return sorted({int(round(x)) for x in np.linspace(0, n_pairs - 1, count)})


def robust_limit(values: np.ndarray, percentile: float = 99.5) -> float:
    """A colour limit that a handful of outliers (BERT's huge dimensions) do not wash out."""
    flat = np.ravel(values)
    finite = flat if np.isfinite(flat).all() else flat[np.isfinite(flat)]   # (no copy when all are)
    if finite.size == 0:
        return 1.0
    if finite.size > 50_000:            # a strided sample is enough to place a colour limit
        finite = finite[:: finite.size // 50_000 + 1]
    finite = np.abs(finite)             # (of the sample only)
    limit = float(np.percentile(finite, percentile))
    return limit if limit > 0 else float(finite.max() or 1.0)


def softmax_with_temperature(scores: np.ndarray, temperature: float, sink=None) -> np.ndarray:
    # [..., n] -> [..., n]: softmax(scores / T), a new array (masked -inf stays 0); with one
    # head's attention sink logit (gpt-oss) the sink / T joins every row (sink_share: its part)
    if sink is None:
        return ops.softmax(scores / np.float32(temperature))
    return _with_sink(scores, temperature, sink)[..., :-1]


def sink_share(scores: np.ndarray, temperature: float, sink: float) -> np.ndarray:
    # [..., n] one head's scores -> [...]: the share of each row's softmax(scores / T) that the
    # head's sink (/ T) takes, the mass no key receives
    return _with_sink(scores, temperature, sink)[..., -1]


def _with_sink(scores: np.ndarray, temperature: float, sink: float) -> np.ndarray:
    t = np.float32(temperature)
    combined = np.empty(scores.shape[:-1] + (scores.shape[-1] + 1,), dtype=np.float32)
    combined[..., :-1] = scores / t
    combined[..., -1] = np.float32(sink) / t
    return ops.softmax(combined, out=combined)


def contributions(weights_row: np.ndarray, v: np.ndarray) -> np.ndarray:
    # [n_k], [n_k, d_head] -> [n_k, d_head]: weight_j * v_j; their sum is the head output
    return weights_row[:, None] * v


def histogram(values: np.ndarray, bins: int = 60, limit: float | None = None):
    """(edges [bins+1], counts [bins]) over a symmetric or data range."""
    flat = values[np.isfinite(values)].ravel()
    if flat.size == 0:
        return np.linspace(-1, 1, bins + 1), np.zeros(bins)
    lo, hi = (float(flat.min()), float(flat.max())) if limit is None else (-limit, limit)
    if hi <= lo:
        hi = lo + 1.0
    counts, edges = np.histogram(flat, bins=bins, range=(lo, hi))
    return edges, counts


def top_k_probabilities(logits: np.ndarray, k: int):
    # [n_vocab] -> (ids [k], probabilities [k]) of softmax(logits), best first
    probabilities = ops.softmax(logits.astype(np.float32, copy=True))
    k = min(k, len(probabilities))
    top = np.argpartition(-probabilities, k - 1)[:k]
    top = top[np.argsort(-probabilities[top])]
    return top, probabilities[top]


def rms_per_dim(x: np.ndarray) -> np.ndarray:
    # [n, d] -> [d]: root-mean-square over tokens, a dimension's typical size
    return np.sqrt(np.mean(np.square(x, dtype=np.float64), axis=0)).astype(np.float32)
