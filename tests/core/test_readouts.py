"""The readouts the explanations quote (core/analysis/readouts.py), against numbers worked out by hand."""
import math

import numpy as np
import pytest

from transformer_stepper.core.analysis import readouts

NEG = -np.inf


def test_softmax_readout_of_a_masked_row():
    weights = np.array([0.25, 0.75, np.nan, np.nan], np.float32)   # keys 2, 3 masked
    scores = np.array([0.0, math.log(3), NEG, NEG], np.float32)
    r = readouts.softmax_readout(weights, scores)
    assert (r.best_key, r.allowed) == (1, 2)
    assert r.best_weight == pytest.approx(0.75) and r.row_sum == pytest.approx(1.0)
    assert r.entropy == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))
    assert r.uniform_entropy == pytest.approx(math.log(2))


def test_position_addition_readout_by_hand():
    e = np.array([[3.0, 0.0], [0.0, 1.0]], np.float32)
    p = np.array([[0.0, 4.0], [0.0, 1.0]], np.float32)
    r = readouts.position_addition_readout(e, p, e + p, selected=0)
    assert r.cos_selected == pytest.approx(3 / 5)           # e·(e+p) / (|e| |e+p|) = 9 / (3·5)
    assert r.cos_mean == pytest.approx((3 / 5 + 1.0) / 2)
    assert r.cos_ep == pytest.approx((0.0 + 1.0) / 2)
    assert (r.e_norm, r.p_norm) == (pytest.approx(3.0), pytest.approx(4.0))
    # RMS over tokens per dim: e (3/√2, 1/√2), p (0, √(17/2)): p dominates dim 1 only
    assert r.p_dominates == 1
    assert r.first_dims_ratio == pytest.approx(math.sqrt(17 / 2) / 2 / ((3 + 1) / math.sqrt(2) / 2))
    assert r.survival == readouts.survival_verdict(r.cos_mean) == "most of e survives in the sum"
    assert readouts.survival_verdict(0.5) == "e is still clearly there"
    assert readouts.survival_verdict(0.1).startswith("here p is much larger than e")


def test_output_projection_readout_by_hand():
    x = np.array([[3.0, 4.0], [1.0, 0.0]], np.float32)
    attn_out = np.array([[0.0, 1.0], [2.0, 0.0]], np.float32)
    r = readouts.output_projection_readout(x, attn_out, norm_in=x + attn_out, norm_out=x)
    np.testing.assert_allclose(r.ratios, [1 / 5, 2.0])
    np.testing.assert_allclose(r.before, [math.sqrt(9 + 25), 3.0])
    np.testing.assert_allclose(r.after, [5.0, 1.0])
    assert r.mean_ratio == pytest.approx(1.1)


def test_movement_is_relative_and_zero_where_nothing_moved():
    before = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]], np.float32)
    after = np.array([[3.0, 5.0], [0.0, 0.0], [1.0, 0.0]], np.float32)
    np.testing.assert_allclose(readouts.movement(before, after), [1 / 5, 0.0, 0.0])


def test_prediction_change_orders_gains_and_losses():
    clean = np.log(np.array([0.5, 0.3, 0.2], np.float32))
    after = np.log(np.array([0.1, 0.3, 0.6], np.float32))
    change = readouts.prediction_change(clean, after, top=1)
    assert (change.top_clean, change.top_after) == (0, 2)
    assert list(change.gained) == [2] and list(change.lost) == [0]
    np.testing.assert_allclose(change.p_after, [0.1, 0.3, 0.6], rtol=1e-5)


def test_echo_count_counts_only_known_positions():
    top = np.array([5, 7, 9, 2])
    ids = np.array([5, 1, 9, 2])
    assert readouts.echo_count(top, ids) == (3, 4)
    assert readouts.echo_count(top, ids, known=np.array([True, True, False, False])) == (1, 2)


def test_recent_loop_finds_the_loop_greedy_decoding_falls_into():
    assert readouts.recent_loop([4, 9, 9, 9, 9]) == readouts.Loop(1, 1, 4)
    assert readouts.recent_loop([1, 2, 3, 5, 6, 5, 6, 5, 6]) == readouts.Loop(3, 2, 3)
    # "the prince the prince the prince in the boys": the loop need not reach the end
    assert readouts.recent_loop([8, 1, 2, 1, 2, 1, 2, 7, 1, 3]) == readouts.Loop(1, 2, 3)
    assert readouts.recent_loop([1, 2, 3, 4, 5, 6]) is None
    assert readouts.recent_loop([7, 7]) is None                    # twice is not yet a loop
    assert readouts.recent_loop([]) is None
    assert readouts.recent_loop([5, 5, 5] + list(range(10, 50))) is None     # long ago: not recent
