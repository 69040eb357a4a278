"""A weight matrix kept as its stored blocks (a GGUF tensor's quantized codes, memory-mapped),
and its products x @ W.T computed from them (core/model/kernels.py), never holding W whole in
float32: an 8B model is 32 GB of float32 and 4.9 GB of Q4_K_M.

- few rows of x (a keystroke, a generation step): each stored row's blocks are decoded into
  L1 and multiplied at once (kernels.few_rows_product), the rows split between threads;
- a handful (2 to SOME_ROWS: an edit near the end): 4 stored rows decoded at a time into a
  buffer (L2), each multiplied by every row of x (kernels.some_rows_product);
- many rows: a tile of TILE_WEIGHTS weights is decoded into float32 (it stays in L3), BLAS
  multiplies it, and the next tile reuses the buffer; each thread takes the next tile when done.

Without numba the same tiles are decoded by the plain numpy dequantizer the matrix was given
(gguf-py's, the reference the kernels equal bit for bit) and multiplied by BLAS: the same
numbers within float32 rounding, slower. The decoded values are the dequantized weights
exactly; only the order of the float32 sums differs from x @ dequantize(W).T (as between two
BLAS builds)."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

import numpy as np

from .blas import blas_threads

F32 = np.float32
FEW_ROWS = 1                    # up to this many rows of x: straight from the blocks
SOME_ROWS = 12                  # up to this many: 4 stored rows decoded at a time, then all of x
                                # (tests/bench/bench_kernels.py: at 2-12 rows faster than either
                                # neighbour, at 16 as fast as tiles and BLAS)
SHARES = 4                      # pieces of a product per thread: a thread the machine's load
                                # holds up leaves its later pieces to the others (numba's prange
                                # splits evenly, and its threads spin at the barrier)
TILE_WEIGHTS = 1 << 20          # weights a decoded tile holds (4 MiB of float32: 256 rows of 4,096)

_half: Optional[np.ndarray] = None
_kernels = None
_pool: Optional[ThreadPoolExecutor] = None
_lock = threading.Lock()


def kernels():
    """core.model.kernels when numba can be imported (compiled on first use, then cached on disk),
    else None."""
    global _kernels, _half
    with _lock:
        if _kernels is None:
            from . import kernels as module
            _kernels = module if module.HAVE_NUMBA else False
            if _kernels:
                _half = module.half_table()
        return _kernels or None


def threads() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(threads(), thread_name_prefix="tiles")
        return _pool


def compiled_kinds() -> tuple[str, ...]:
    """The stored types whose products the compiled kernels compute."""
    from .kernels import KINDS
    return tuple(KINDS)


def _in_pieces(n_rows: int, work: Callable[[int, int], None]) -> None:
    # work(first, stop) over SHARES pieces a thread of rows 0..n_rows, on the pool's threads
    n_pieces = min(n_rows, threads() * SHARES)
    if n_pieces <= 1:
        work(0, n_rows)
        return
    bounds = [n_rows * k // n_pieces for k in range(n_pieces + 1)]
    for future in [_executor().submit(work, a, b) for a, b in zip(bounds, bounds[1:])]:
        future.result()


def _taken(queue):
    # the items of a shared iterator, taken one at a time by several threads
    while True:
        with _lock:
            start = next(queue, None)
        if start is None:
            return
        yield start


class QuantizedMatrix:
    """W [n_rows, n_cols] as stored: codes [n_rows, bytes a row] (uint8, may be memory-mapped)
    of `kind` (a name in core.model.kernels.KINDS); `reference(codes)` is the plain numpy
    dequantizer of those rows (float32 [rows, n_cols])."""

    def __init__(self, codes: np.ndarray, kind: str, n_cols: int,
                 reference: Callable[[np.ndarray], np.ndarray]) -> None:
        from .kernels import KINDS
        number, block_size, block_bytes = KINDS[kind]
        if codes.ndim != 2 or n_cols % block_size or codes.shape[1] != n_cols // block_size * block_bytes:
            raise ValueError(f"{kind}: {codes.shape} bytes do not hold rows of {n_cols} weights")
        if isinstance(codes, np.memmap):        # a plain view: a memmap's slices cost Python calls
            codes = codes.view(np.ndarray)
        self.codes, self.kind, self.n_cols, self.reference = codes, kind, n_cols, reference
        self.number, self.block_size = number, block_size

    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape[0], self.n_cols

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes

    def dequantize(self, rows=slice(None)) -> np.ndarray:
        """[rows, n_cols] float32: the dequantized weights (equal to the reference bit for bit)."""
        codes = self.codes[rows]
        compiled = kernels()
        if compiled is None:
            return np.ascontiguousarray(self.reference(codes), dtype=F32)
        out = np.empty((codes.shape[0], self.n_cols), dtype=F32)
        _in_pieces(len(codes), lambda a, b: compiled.dequantize_rows(self.number, self.block_size, codes[a:b],
                                                                     out[a:b], _half))
        return out

    def times_transposed(self, x: np.ndarray) -> np.ndarray:
        """[n, n_cols] -> [n, n_rows]: x @ W.T."""
        x = np.ascontiguousarray(x, dtype=F32)
        out = np.empty((x.shape[0], self.codes.shape[0]), dtype=F32)
        compiled = kernels()
        if compiled is not None and len(x) <= FEW_ROWS:
            _in_pieces(len(self.codes), lambda a, b: compiled.few_rows_product(
                self.number, self.block_size, self.codes[a:b], x, out[:, a:b], _half))
            return out
        if compiled is not None and len(x) <= SOME_ROWS:
            _in_pieces(len(self.codes), lambda a, b: compiled.some_rows_product(
                self.number, self.block_size, self.codes[a:b], x, out[:, a:b], _half))
            return out
        self._tiled(x, out, compiled)
        return out

    def _tiled(self, x: np.ndarray, out: np.ndarray, compiled) -> None:
        n_rows = self.codes.shape[0]
        step = max(1, TILE_WEIGHTS // self.n_cols)
        starts = list(range(0, n_rows, step))
        if compiled is None:
            for start in starts:
                tile = self.reference(self.codes[start:start + step])
                out[:, start:start + len(tile)] = x @ tile.T
            return
        workers = min(threads(), len(starts))
        queue = iter(starts)            # each thread takes the next tile when it is done with
                                        # one: a thread the machine's load holds up takes fewer

        def work(which: int) -> None:
            tile = np.empty((step, self.n_cols), dtype=F32)
            part = np.empty((x.shape[0], step), dtype=F32)
            for start in _taken(queue):
                rows = min(step, n_rows - start)
                compiled.dequantize_rows(self.number, self.block_size, self.codes[start:start + rows],
                                         tile[:rows], _half)
                np.matmul(x, tile[:rows].T, out=part[:, :rows])
                out[:, start:start + rows] = part[:, :rows]

        if workers == 1:
            work(0)
            return
        with blas_threads(1):            # one BLAS thread under each of ours
            for future in [_executor().submit(work, which) for which in range(workers)]:
                future.result()
