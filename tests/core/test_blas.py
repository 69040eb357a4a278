import pytest

from transformer_stepper.core.model import blas


def test_thread_count_is_set_and_restored():
    api = blas._find_api()
    if not api:
        pytest.skip("numpy's BLAS is not OpenBLAS")
    _, get_threads = api
    before = int(get_threads())
    assert blas.get_blas_threads() == before
    with blas.blas_threads(1):
        assert int(get_threads()) == 1 == blas.get_blas_threads()
    assert int(get_threads()) == before
    assert blas.set_blas_threads(1) is True
    assert int(get_threads()) == 1
    blas.set_blas_threads(before)
    assert int(get_threads()) == before
