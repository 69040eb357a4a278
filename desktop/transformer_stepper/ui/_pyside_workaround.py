"""PySide6 6.12.0 on Python < 3.12 drops a reference to None on every call of a method that
returns void (and to False/True passed as arguments), so a few thousand paint calls deallocate
None and abort the interpreter ("none_dealloc"). From Python 3.12 these objects are immortal
and the bug is harmless. On the affected combination we give the three singletons a reference
count no session can exhaust, which is what 3.12's immortality does. PySide6 < 6.12 is not
affected (the project pins it); this keeps an environment that already has 6.12.0 alive."""
from __future__ import annotations

import ctypes
import sys

_RESERVE = 1 << 40


def apply() -> bool:
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    import shiboken6

    if not shiboken6.__version__.startswith("6.12."):
        return False
    for singleton in (None, True, False):
        refcount = ctypes.c_ssize_t.from_address(id(singleton))   # ob_refcnt leads the object
        if refcount.value < _RESERVE:
            refcount.value += _RESERVE
    return True


applied = apply()
