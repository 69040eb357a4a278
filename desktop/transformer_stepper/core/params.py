"""Where the forward pass reads its weights from: a mapping name -> float32 array, by the
names documented in forward.py. A store may read lazily (a big checkpoint widens bf16 per
tensor on use, within a memory budget): it then says each tensor's shape without reading it,
gathers rows of a table without widening all of it, and walks a table in row blocks."""
from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np


class ParamStore(Mapping[str, np.ndarray]):
    """A read-only mapping of checked float32 parameters. Subclasses implement __getitem__,
    __iter__, __len__ and shape(); rows() and row_blocks() may be made cheaper."""

    def shape(self, name: str) -> tuple[int, ...]:
        raise NotImplementedError

    def rows(self, name: str, index: np.ndarray) -> np.ndarray:
        # [n] row indices -> [n, ...] rows of a table
        return self[name][index]

    def row_blocks(self, name: str, block_rows: int = 8192) -> Iterator[tuple[int, np.ndarray]]:
        # (first row, [rows, ...]) for consecutive blocks of a table
        table = self[name]
        for start in range(0, table.shape[0], block_rows):
            yield start, table[start:start + block_rows]

    def check_unchanged(self) -> None:
        """Raise a ModelError if the files read from changed since they were opened (a read
        of a truncated memory map would end the process); a store in memory never changes."""

    def nbytes_widened(self) -> int:
        """Bytes of weights held in memory beyond the file mapping (widened or transposed)."""
        return 0
