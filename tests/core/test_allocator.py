import sys

import numpy as np
import pytest

from transformer_stepper.core.model import allocator


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_glibc_thresholds_are_raised_once_and_stay_raised():
    assert allocator.keep_freed_memory() is True
    assert allocator.keep_freed_memory() is True  # idempotent


def test_loading_a_model_changes_nothing_process_wide_and_the_entry_points_tune(monkeypatch):
    calls = []
    monkeypatch.setattr("transformer_stepper.runtime.keep_freed_memory", lambda: calls.append(1))
    from transformer_stepper import load_model
    from transformer_stepper.cli import main

    load_model()
    assert calls == [], "a library call must not tune the process"
    assert main(["--version"]) == 0
    assert calls == [1], "the command line tunes the process once"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_returning_freed_memory_gives_free_heap_pages_back():
    from tests.bench.memory import rss_anon

    allocator.keep_freed_memory()            # freed blocks now stay in the heap
    blocks = [np.ones(1 << 20, np.float32) for _ in range(64)]   # 4 MiB each, resident, heap
    kept = blocks[-1]                                  # a live block at the heap's top
    del blocks
    before = rss_anon()
    assert allocator.return_freed_memory() is True
    assert before - rss_anon() > 128 << 20, "the freed blocks' pages went back to the system"
    assert kept.sum() == 1 << 20
