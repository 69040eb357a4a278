"""Keep freed memory in the heap so the next trace does not page-fault it in again.

glibc hands a freed block above its mmap threshold straight back to the OS and trims the heap
top above 128 KiB; a trace allocates tens to hundreds of MiB of fresh arrays, so every trace
then pays a page fault (and a page of zeroing) per 4 KiB. Measured on all-MiniLM-L6-v2, 2
cores: 128 tokens 38 -> 22 ms, 512 tokens 200 -> 116 ms (tests/bench/bench_core.py). The cost
is that the process keeps its peak heap instead of returning it; freed memory is reused by the
next trace. A no-op where the C library is not glibc.

The heap so kept is the largest working set so far. Where traces are big (a long text on a
wide model), `return_freed_memory()` hands its free pages back (malloc_trim, 1-10 ms); the
window calls it when idle (state/session.py RETURN_MEMORY_FROM)."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 << 20     # glibc's largest accepted value on 64-bit
_TRIM_THRESHOLD = 1 << 30
_done = False


@functools.cache
def _libc():
    # found once: find_library runs ldconfig in a subprocess (1-3 ms), and the window trims
    # on the GUI thread each time its workers go idle
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; True if they were set."""
    global _done
    if _done or not sys.platform.startswith("linux"):
        return _done
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    _done = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    return _done


def return_freed_memory() -> bool:
    """Give the free pages of glibc's heaps back to the system (malloc_trim); True if done."""
    if not sys.platform.startswith("linux"):
        return False
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim(0)
    return True
