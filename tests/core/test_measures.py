"""The measures the rotary views plot, checked against the forward pass they describe."""
import numpy as np
import pytest

from tests.core.test_architectures import make
from transformer_stepper.core import measures


def test_rotated_at_reproduces_the_forward_pass_rotation():
    model = make()
    trace = model.trace("the bank of the river")
    q_before, q_after = trace.layer("q_unrotated", 0)[1], trace.layer("q", 0)[1]   # head 1
    again = measures.rotated_at(model.config, q_before[5], np.array([5]))[0]
    np.testing.assert_allclose(again, q_after[5], rtol=1e-5, atol=1e-6)


def test_shifting_query_and_key_together_leaves_the_score_unchanged():
    model = make()
    trace = model.trace("the bank of the river and the money")
    q, k = trace.layer("q_unrotated", 0)[0], trace.layer("k_unrotated", 0)[0]
    together, key_only = measures.rope_shift_scores(model.config, q[6], k[2], 6, 2, np.arange(0, 40))
    np.testing.assert_allclose(together, together[0], atol=1e-4)
    # and at shift 0 it is the score the model computed
    assert together[0] == pytest.approx(float(trace.layer("scores", 0)[0, 6, 2]), abs=1e-4)
    assert np.ptp(key_only) > 1e-2


def test_pairs_and_wavelengths():
    assert measures.shown_pairs(8) == [0, 2, 5, 7]
    before, after = np.arange(8.0), np.arange(8.0) + 1
    (b, a), = measures.pair_arrows(before, after, [1])
    np.testing.assert_array_equal(b, [1, 5]) and np.testing.assert_array_equal(a, [2, 6])
    np.testing.assert_allclose(measures.wavelengths(np.array([1.0, 0.1])), [2 * np.pi, 20 * np.pi], rtol=1e-6)
    np.testing.assert_allclose(measures.wrapped(np.array([3 * np.pi / 2])), [-np.pi / 2], atol=1e-6)
