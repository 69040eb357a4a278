"""Pin numpy's OpenBLAS to a thread count (training; the desktop app).

Why: OpenBLAS's idle threads spin. Training multiplies small matrices ([~1000, 64] x [64, 256]); OpenBLAS's threads cost
more to wake than they save, and when other processes share the cores they spin and the step
time collapses (measured 60 ms single-threaded vs 620 ms with two threads on a busy 2-core
machine). The app's worker traces while the GUI thread draws: with two BLAS threads on two
cores they fight the GUI thread (MiniLM, 72 tokens: keystroke -> plots 100-240 ms with two
threads, 75-110 ms with one; tests/bench/bench_ui.py). There is no numpy API for this, so find the library numpy ships with and call its
set_num_threads; where it is not found (another BLAS), leave things as they are."""
from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from typing import Iterator, Optional

import numpy as np

_SYMBOLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
            ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
            ("openblas_set_num_threads", "openblas_get_num_threads"))
_api: Optional[tuple] = None


def _find_api():
    global _api
    if _api is None:
        _api = ()
        libs_dir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
        for path in sorted(glob.glob(os.path.join(libs_dir, "*openblas*"))):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for set_name, get_name in _SYMBOLS:
                if hasattr(lib, set_name) and hasattr(lib, get_name):
                    _api = (getattr(lib, set_name), getattr(lib, get_name))
                    break
            if _api:
                break
    return _api


def set_blas_threads(n: int) -> bool:
    """From now on numpy's OpenBLAS uses `n` threads; False where it cannot be found."""
    api = _find_api()
    if api:
        api[0](int(n))
    return bool(api)


def get_blas_threads() -> Optional[int]:
    """How many threads numpy's OpenBLAS uses now; None where it cannot be found."""
    api = _find_api()
    return int(api[1]()) if api else None


@contextlib.contextmanager
def blas_threads(n: Optional[int]) -> Iterator[None]:
    """Within the block numpy's OpenBLAS uses `n` threads (None: leave it alone)."""
    api = _find_api() if n else ()
    if not api:
        yield
        return
    set_threads, get_threads = api
    before = int(get_threads())
    set_threads(int(n))
    try:
        yield
    finally:
        set_threads(before)
