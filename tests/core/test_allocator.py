import sys

import pytest

from transformer_stepper.core import allocator


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_glibc_thresholds_are_raised_once_and_stay_raised():
    assert allocator.keep_freed_memory() is True
    assert allocator.keep_freed_memory() is True  # idempotent


def test_loading_a_model_tunes_the_allocator(monkeypatch):
    from transformer_stepper import load_model

    calls = []
    monkeypatch.setattr("transformer_stepper.io.loader.keep_freed_memory", lambda: calls.append(1))
    load_model()
    assert calls == [1]
