"""Measures of the embedding table E while it learns (numpy only): how far apart the word
classes are, each word's nearest neighbours by cosine, and a 2-D map whose axes stay put
from one frame to the next so that motion on screen is motion of E."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..model import measures


def class_separation(table: np.ndarray, classes: Sequence[str],
                     ignore: Sequence[str] = ("special",)) -> float:
    """Mean cosine between rows of the same class minus mean cosine between rows of different
    classes ([n_vocab, d_model], a class per row). 0 for a table with no class structure
    (random rows); it rises as words used alike gather."""
    keep = np.array([c not in ignore for c in classes])
    labels = np.asarray(classes, dtype=object)[keep]
    cosines = measures.cosine_matrix(np.asarray(table, dtype=np.float64)[keep])
    same = labels[:, None] == labels[None, :]
    off_diagonal = ~np.eye(len(labels), dtype=bool)
    within = cosines[same & off_diagonal]
    across = cosines[~same]
    if not len(within) or not len(across):
        return 0.0
    return float(within.mean() - across.mean())


def nearest_words(table: np.ndarray, query_ids: Sequence[int], k: int = 5,
                  exclude: Sequence[int] = ()) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the k other rows of largest cosine: (ids [q, k], cosines [q, k]).
    Rows in `exclude` (special tokens) are never neighbours."""
    unit = measures.unit_rows(np.asarray(table, dtype=np.float64))
    cosines = unit[list(query_ids)] @ unit.T                      # [q, n_vocab]
    cosines[np.arange(len(query_ids)), list(query_ids)] = -np.inf
    if len(exclude):
        cosines[:, list(exclude)] = -np.inf
    order = np.argsort(-cosines, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(cosines, order, axis=1)


class StableMap:
    """A 2-D PCA map of E's rows that keeps its orientation between frames.

    Each frame refits the PCA on the table shown (so the axes are the directions E spreads
    along now) and then turns the new map by the rotation (or reflection) that best matches
    the previous frame's points (orthogonal Procrustes in 2-D): a re-fit alone may flip or
    swap axes from one frame to the next, which would look like motion that is not there.
    `fixed(table)` instead projects with axes fitted once, on a reference table (scrubbing
    through snapshots: every snapshot on the final table's axes)."""

    def __init__(self) -> None:
        self.previous: Optional[np.ndarray] = None     # [n_vocab, 2]
        self.reference: Optional[tuple[np.ndarray, np.ndarray]] = None
        self.explained = np.zeros(2)

    def reset(self) -> None:
        self.previous = None

    def follow(self, table: np.ndarray) -> np.ndarray:
        """[n_vocab, d_model] -> [n_vocab, 2], aligned with the previous call's map."""
        mean, axes, self.explained = measures.principal_axes(table, 2)
        coords = measures.project(table, mean, axes)
        if self.previous is not None and self.previous.shape == coords.shape:
            u, _, vt = np.linalg.svd(coords.T @ self.previous)
            coords = coords @ (u @ vt)
        self.previous = coords
        return coords

    def fit_reference(self, table: np.ndarray) -> None:
        mean, axes, self.explained = measures.principal_axes(table, 2)
        self.reference = (mean, axes)

    def fixed(self, table: np.ndarray) -> np.ndarray:
        if self.reference is None:
            self.fit_reference(table)
        return measures.project(table, *self.reference)
