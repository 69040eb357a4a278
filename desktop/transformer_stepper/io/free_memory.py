"""The memory the machine has free, and the weight cache's default budget taken from it.

available_memory() reads, without new dependencies: Linux's /proc/meminfo `MemAvailable`
(free memory plus the page cache the kernel can drop); on Windows GlobalMemoryStatusEx's
`ullAvailPhys` (ctypes); elsewhere POSIX `sysconf(SC_AVPHYS_PAGES)` where it exists (free
pages only: a low figure, never a high one). None when none of these answers (macOS has no
SC_AVPHYS_PAGES): the fixed default (768 MiB) is used then.

default_weight_budget(): half of what is free once `reserve` (the layer-detail budget, the
trace and the window) is set aside, in steps of 256 MiB, at least 256 MiB. A 1B-parameter
bf16 model widened to float32 needs 4.9 GB: with 12 GB free it stays widened and typing
re-reads no weights (tests/bench/bench_big.py --weight-budget)."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Optional

from .checkpoint_params import DEFAULT_WEIGHT_BUDGET

MiB = 1 << 20
STEP = 256 * MiB                      # the budget dialog's step
FLOOR = 256 * MiB                     # a machine short of memory still caches a layer or two
APP_RESERVE = 1 << 30                 # the trace of a long text, the window, the interpreter
FRACTION = 0.5                        # of what is left: other programs need memory too


@dataclass(frozen=True)
class FreeMemory:
    nbytes: int
    source: str                       # "MemAvailable", "GlobalMemoryStatusEx", "SC_AVPHYS_PAGES"


def meminfo_available(text: str) -> Optional[int]:
    """Bytes of `MemAvailable:` in the text of /proc/meminfo (None if absent or unreadable)."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            try:
                value = int(fields[1])
            except (IndexError, ValueError):
                return None
            unit = fields[2].lower() if len(fields) > 2 else "kb"
            return value * (1024 if unit == "kb" else 1) if value >= 0 else None
    return None


def _windows_available() -> Optional[int]:
    import ctypes
    from ctypes import wintypes

    class MemoryStatusEx(ctypes.Structure):
        _fields_ = [("dwLength", wintypes.DWORD), ("dwMemoryLoad", wintypes.DWORD),
                    ("ullTotalPhys", ctypes.c_ulonglong), ("ullAvailPhys", ctypes.c_ulonglong),
                    ("ullTotalPageFile", ctypes.c_ulonglong), ("ullAvailPageFile", ctypes.c_ulonglong),
                    ("ullTotalVirtual", ctypes.c_ulonglong), ("ullAvailVirtual", ctypes.c_ulonglong),
                    ("ullAvailExtendedVirtual", ctypes.c_ulonglong)]

    status = MemoryStatusEx()
    status.dwLength = ctypes.sizeof(MemoryStatusEx)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
        return None
    return int(status.ullAvailPhys)


def available_memory(meminfo: str = "/proc/meminfo") -> Optional[FreeMemory]:
    """What the machine has free now, and where the figure came from; None if unknown."""
    try:
        with open(meminfo, encoding="ascii", errors="replace") as file:
            nbytes = meminfo_available(file.read())
        if nbytes is not None:
            return FreeMemory(nbytes, "MemAvailable")
    except OSError:
        pass
    try:
        if sys.platform == "win32":
            nbytes = _windows_available()
            return FreeMemory(nbytes, "GlobalMemoryStatusEx") if nbytes is not None else None
        if "SC_AVPHYS_PAGES" in os.sysconf_names:
            nbytes = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            return FreeMemory(nbytes, "SC_AVPHYS_PAGES") if nbytes > 0 else None
    except (OSError, ValueError, AttributeError):
        pass
    return None


def default_weight_budget(free: Optional[FreeMemory], detail_budget: int) -> int:
    """Bytes of widened weights to keep by default: FRACTION of the free memory left after the
    detail budget and APP_RESERVE, rounded down to STEP, at least FLOOR; DEFAULT_WEIGHT_BUDGET
    when the free memory is unknown."""
    if free is None:
        return DEFAULT_WEIGHT_BUDGET
    spare = free.nbytes - max(detail_budget, 0) - APP_RESERVE
    return max(FLOOR, int(spare * FRACTION) // STEP * STEP)
