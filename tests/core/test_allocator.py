import sys

import pytest

from transformer_stepper.core import allocator


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
