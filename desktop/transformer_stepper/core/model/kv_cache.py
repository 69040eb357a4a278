"""The keys and values a causal model keeps per layer, to extend a text without recomputing
what it already computed (core/model/forward.py appends to it; the trace keeps it for undo)."""
from __future__ import annotations

from typing import Optional

import numpy as np


class KVCache:
    """Every layer's keys and values (after the rotation, before GQA's repeat), per position:
    what a causal model reuses when the text grows by a token. Extending returns a new cache,
    so the trace it came from (undo) keeps its own."""

    def __init__(self, n_layer: int, keys=None, values=None) -> None:
        self.keys: list[Optional[np.ndarray]] = list(keys) if keys else [None] * n_layer
        self.values: list[Optional[np.ndarray]] = list(values) if values else [None] * n_layer

    @property
    def n_seq(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[1]

    def append(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # [n_kv, m, d_head] new rows -> every row so far; stored read-only
        if self.keys[layer] is not None:
            k = np.concatenate([self.keys[layer], k], axis=1)
            v = np.concatenate([self.values[layer], v], axis=1)
        k.flags.writeable = v.flags.writeable = False
        self.keys[layer], self.values[layer] = k, v
        return k, v

    def copy(self) -> "KVCache":
        return KVCache(len(self.keys), self.keys, self.values)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in [*self.keys, *self.values] if a is not None)
