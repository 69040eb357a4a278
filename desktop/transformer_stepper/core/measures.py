"""Numbers the views show, computed from a trace (or a model's own vectors) by pure, tested
functions: the views only plot them and fill explanation templates."""
from __future__ import annotations

import numpy as np

from . import ops
from .config import ModelConfig
from .forward import rope_frequencies


def rotated_at(config: ModelConfig, vector: np.ndarray, positions: np.ndarray) -> np.ndarray:
    # [d_head] unrotated, [m] positions -> [m, d_head]: the vector as RoPE turns it at each position
    angles = np.asarray(positions, dtype=np.float32)[:, None] * rope_frequencies(config)[None, :]
    return ops.rotate(np.broadcast_to(vector, (len(positions), len(vector)))[None],
                      np.cos(angles), np.sin(angles))[0]


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


def pair_arrows(before: np.ndarray, after: np.ndarray, pairs: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """[d_head] vectors -> for each pair index i, ((x, y) before, (x, y) after) with
    x = v[i], y = v[i + d_head/2] (Hugging Face's rotate_half pairing)."""
    half = len(before) // 2
    return [(np.array([before[i], before[i + half]]), np.array([after[i], after[i + half]])) for i in pairs]


def shown_pairs(n_pairs: int, count: int = 4) -> list[int]:
    """A few rotated pairs from fast (0) to slow (the last)."""
    return sorted({int(round(x)) for x in np.linspace(0, n_pairs - 1, count)})
