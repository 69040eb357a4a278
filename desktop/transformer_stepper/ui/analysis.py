"""Small numpy computations the views show but the forward pass does not record (numpy only:
no Qt). They read the trace and never write to it: trace arrays are read-only."""
from __future__ import annotations

import numpy as np

from ..core import ops
from ..core.measures import cosine_matrix, cosine_rows, nearest_rows  # noqa: F401  (moved to core)
from ..core.tokenize import Tokenizer
from ..core.trace import Trace


def token_labels(trace: Trace, tokenizer: Tokenizer) -> list[str]:
    """How each token reads on a plot axis: the tokenizer's piece, with byte-level markers
    (GPT-2's 'Ġ' for a leading space, 'Ċ' for a newline) made readable."""
    labels = []
    for piece in trace.tokens:
        label = piece.replace("Ġ", "␣").replace("Ċ", "↵").replace("▁", "␣")
        labels.append(label if label.strip() else repr(piece))
    return labels


def default_token(trace: Trace) -> int:
    """Not a special token ([CLS] is rarely the interesting one): in a causal model the last
    one, which sees the whole text; otherwise the first."""
    ordinary = np.flatnonzero(~trace.special_tokens_mask)
    if not len(ordinary):
        return 0
    return int(ordinary[-1] if trace.config.causal else ordinary[0])


def robust_limit(values: np.ndarray, percentile: float = 99.5) -> float:
    """A colour limit that a handful of outliers (BERT's huge dimensions) do not wash out."""
    finite = np.abs(values[np.isfinite(values)])
    if finite.size == 0:
        return 1.0
    if finite.size > 50_000:            # a strided sample is enough to place a colour limit
        finite = finite[:: finite.size // 50_000 + 1]
    limit = float(np.percentile(finite, percentile))
    return limit if limit > 0 else float(finite.max() or 1.0)


def softmax_with_temperature(scores: np.ndarray, temperature: float) -> np.ndarray:
    # [..., n] -> [..., n]: softmax(scores / T), a new array (masked -inf stays 0)
    return ops.softmax(scores / np.float32(temperature))


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
