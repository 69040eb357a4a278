"""Process tuning, done once by the entry points (the app, the command line), never by a
library call: `load_model()` and `model.trace()` change nothing process-wide.

- glibc keeps freed memory (core/model/allocator.py): traces stop page-faulting their arrays in.
- The app runs numpy's OpenBLAS on one thread (core/model/blas.py): spinning BLAS threads fight the
  GUI thread. A forward pass over a long text (ui/workers.py LONG_TEXT) uses every core while
  it runs: its matrices are big enough to pay for them.
- The app switches between Python threads every 0.2 ms instead of 5 ms: a worker's forward
  pass otherwise waits up to 5 ms for the GIL after every numpy call while the GUI thread runs
  Python (MiniLM, 512 tokens, GUI thread busy in Python: 2.47 s at 5 ms, 0.41 s at 0.2 ms,
  0.26 s standalone; tests/bench/bench_gil.py).
"""
from __future__ import annotations

import sys

from .core.model.allocator import keep_freed_memory
from .core.model.blas import set_blas_threads

APP_SWITCH_INTERVAL = 0.0002     # seconds


def tune_process(app: bool = False) -> None:
    keep_freed_memory()
    if app:
        set_blas_threads(1)
        sys.setswitchinterval(APP_SWITCH_INTERVAL)
