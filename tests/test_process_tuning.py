"""Process tuning (glibc's malloc thresholds, OpenBLAS's thread count, the GIL's switch
interval) is the entry points' business (runtime.py, called by the command line's main and the
app): importing the package, `load_model()` and `model.trace()` leave all three as they were.
Watched in a fresh interpreter, where nothing has tuned anything yet, by their effects: the
thread count OpenBLAS reports, sys.getswitchinterval(), and whether glibc serves a 16 MiB block
by mmap (its default; keep_freed_memory raises the threshold to 32 MiB)."""
import json
import subprocess
import sys

import pytest

SCRIPT = r"""
import ctypes, json, sys

switch_interval = sys.getswitchinterval()
libc = ctypes.CDLL("libc.so.6")


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)


def mapped(size):
    # glibc raises its (dynamic) threshold to the size of a freed mapped block: probe each size
    # once, each larger than the last
    before = libc.mallinfo2().hblks
    block = libc.malloc(size)
    answer = libc.mallinfo2().hblks > before
    libc.free(block)
    return answer


from transformer_stepper import load_model
from transformer_stepper.core.model import allocator, blas

api = blas._find_api()
threads = int(api[1]()) if api else None
load_model().trace("The bank of the river.")
report = {
    "threads": [threads, int(api[1]()) if api else None],
    "switch_interval": [switch_interval, sys.getswitchinterval()],
    "allocator_done": allocator._done,
    "mapped_after_load": mapped(16 << 20),
}
from transformer_stepper.runtime import tune_process

tune_process(app=True)      # the check can fail: what the entry points do is seen
report["tuned"] = {"threads": int(api[1]()) if api else None,
                   "switch_interval": sys.getswitchinterval(),
                   "mapped": mapped(24 << 20)}
print(json.dumps(report))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_load_model_leaves_malloc_blas_and_the_gil_alone():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    before, after = report["threads"]
    assert after == before, "load_model changed OpenBLAS's thread count"
    assert report["switch_interval"][1] == report["switch_interval"][0], "load_model changed the GIL's switch interval"
    assert report["allocator_done"] is False, "load_model raised glibc's malloc thresholds"
    assert report["mapped_after_load"] is True, "a 16 MiB block came from the heap: the mmap threshold was raised"
    tuned = report["tuned"]
    assert tuned["mapped"] is False and tuned["switch_interval"] == pytest.approx(0.0002)
    if before is not None:
        assert tuned["threads"] == 1
