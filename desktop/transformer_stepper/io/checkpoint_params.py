"""Parameters read from a checkpoint on use, not at open.

The loader maps each core name to a checkpoint tensor and a layout transform; this store reads
a tensor the first time the forward pass asks for it. float32 tensors stay memory-mapped (the
page cache holds them, not the process); bf16/fp16 ones and transposed copies are widened into
memory and kept in a cache bounded by a byte budget, so a model larger than that budget streams
through it layer by layer. When the budget is full the tensor read most recently before the new
one leaves, not the least recently used: a pass reads layers 0 -> N-1 in order, and
least-recently-used would keep the last layers, the ones the next pass needs last, so every read
of every pass would miss; this way the first layers that fit stay and each pass finds them. A table's rows (the embedding
lookup) and row blocks (the output head) are widened only where they are read."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Iterator

import numpy as np

from ..core.model.params import ParamStore
from .keymaps import IDENTITY, Transform

DEFAULT_WEIGHT_BUDGET = 768 << 20    # bytes of widened weights kept (768 MiB)
ROW_BLOCK = 8192


def _held_bytes(value: np.ndarray) -> int:
    # bytes in anonymous memory: 0 for a view of the file mapping
    base = value
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return 0 if not isinstance(base, np.ndarray) else base.nbytes


class CheckpointParams(ParamStore):
    def __init__(self, ckpt, entries: dict[str, tuple[str, Transform]],
                 shapes: dict[str, tuple[int, ...]], budget: int = DEFAULT_WEIGHT_BUDGET) -> None:
        self.ckpt = ckpt                     # io.loader.Checkpoint
        self.entries = entries               # core name -> (checkpoint name, transform)
        self.shapes = shapes                 # core name -> core shape (checked at open)
        self.budget = budget
        self._raw: OrderedDict[str, np.ndarray] = OrderedDict()     # checkpoint name -> float32
        self._done: OrderedDict[str, np.ndarray] = OrderedDict()    # core name -> transformed
        self._lock = threading.RLock()
        self._counted = 0                    # nbytes_widened's last figure

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, name) -> bool:
        return name in self.entries

    def shape(self, name: str) -> tuple[int, ...]:
        return self.shapes[name]

    def check_unchanged(self) -> None:
        self.ckpt.check_unchanged()

    def __getitem__(self, name: str) -> np.ndarray:
        # every read, of a tensor kept too (float32 ones are views of the mapping), first
        # checks its file: a truncated mapping would end the process with SIGBUS
        self.ckpt.check_unchanged(self.entries[name][0])
        with self._lock:
            value = self._done.get(name)
            if value is not None:
                self._done.move_to_end(name)
                return value
            ckpt_name, transform = self.entries[name]        # KeyError names the tensor
            raw = self._raw.get(ckpt_name)
            if raw is None:
                raw = self.ckpt.get(ckpt_name)               # float32, read-only
                self._raw[ckpt_name] = raw
            else:
                self._raw.move_to_end(ckpt_name)
            value = transform(raw)
            if value is not raw and value.base is not raw and value.flags.writeable:
                value.flags.writeable = False
            self._done[name] = value
            self._evict(name)
            return value

    def _evict(self, keep: str) -> None:
        # drop the most recently used tensors but the one just read until within budget
        while self.nbytes_widened() > self.budget:
            victim = next((n for n in reversed(self._done) if n != keep), None)
            if victim is None:
                break
            del self._done[victim]
            self._drop_unused_raw(keep)
        self._drop_unused_raw(keep)

    def set_budget(self, budget: int) -> None:
        """A new budget (bytes), applied at once: a lower one frees the most recently used
        (the first layers stay, as _evict keeps them)."""
        with self._lock:
            self.budget = int(budget)
            while self._done and self.nbytes_widened() > self.budget:
                del self._done[next(reversed(self._done))]
            self._drop_unused_raw(None)

    def _drop_unused_raw(self, keep) -> None:
        # a raw tensor is kept only while a transformed tensor still shares it (GPT-2's c_attn)
        # or it costs nothing (memory-mapped)
        used = {self.entries[n][0] for n in self._done} | ({self.entries[keep][0]} if keep else set())
        for ckpt_name in [n for n in self._raw if n not in used and _held_bytes(self._raw[n])]:
            del self._raw[ckpt_name]

    def nbytes_widened(self, wait: bool = True) -> int:
        """Bytes of widened weights held. wait=False (the status bar, on the GUI thread): the
        figure last counted if a worker holds the store, reading or widening a tensor (that
        took 10 s on Llama-1B-shaped with the cores busy)."""
        if not self._lock.acquire(blocking=wait):
            return self._counted
        try:
            seen: dict[int, int] = {}
            for value in [*self._done.values(), *self._raw.values()]:
                base = value
                while isinstance(base.base, np.ndarray):
                    base = base.base
                seen[id(base)] = _held_bytes(value)
            self._counted = sum(seen.values())
            return self._counted
        finally:
            self._lock.release()

    def _identity_file_tensor(self, name: str):
        ckpt_name, transform = self.entries[name]
        return ckpt_name if transform is IDENTITY else None

    def rows(self, name: str, index: np.ndarray) -> np.ndarray:
        ckpt_name = self._identity_file_tensor(name)
        if ckpt_name is None or name in self._done:
            return self[name][index]
        self.ckpt.check_unchanged(ckpt_name)
        return self.ckpt.rows(ckpt_name, np.asarray(index))

    def row_blocks(self, name: str, block_rows: int = ROW_BLOCK) -> Iterator[tuple[int, np.ndarray]]:
        ckpt_name = self._identity_file_tensor(name)
        if ckpt_name is None or name in self._done or self.ckpt.is_float32(ckpt_name):
            yield 0, self[name]
            return
        n_rows = self.shapes[name][0]
        for start in range(0, n_rows, block_rows):
            self.ckpt.check_unchanged(ckpt_name)
            yield start, self.ckpt.rows(ckpt_name, slice(start, start + block_rows))
