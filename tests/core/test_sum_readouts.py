"""What the weighted sum passes on and loses (core/analysis/sum_readouts.py): another valid weighting
with the same output exists exactly when the keys outnumber rank [Vᵀ; 1ᵀ], and is checked here
by its definition (≥ 0, the same total, not w, the same Σ w′ⱼ vⱼ), computed by the test itself;
below that the weights are read back from the output."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.analysis import sum_readouts
from transformer_stepper.core.analysis.sum_readouts import (
    linear_program,
    recover_weights,
    same_output_weighting,
    survival,
    weighted_sum_answer)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LONG = ("The queen rode to the bank of the river and she was tired . The king sat in the mill and he was "
        "happy with the gold . The old man went to the bank to get money and he gave it to the girl .")


def _softmax(x):
    e = np.exp(x - x.max())
    return (e / e.sum()).astype(np.float32)


def _assert_valid(other, w, v, rtol=1e-5, least_change=1e-4):
    """The definition, checked without the module's own numbers: w′ ≥ 0, Σ w′ = Σ w, w′ ≠ w
    on the keys w reads (0 where w is 0), and Σ w′ⱼ vⱼ = Σ wⱼ vⱼ."""
    w64, v64, new = np.nan_to_num(w.astype(np.float64)), v.astype(np.float64), other.weights
    assert np.all(new >= 0)
    assert np.all(new[w64 == 0] == 0)
    assert abs(new.sum() - w64.sum()) < 1e-6
    assert 0.5 * np.abs(new - w64).sum() > least_change
    same, real = new @ v64, w64 @ v64
    assert np.linalg.norm(same - real) <= rtol * np.linalg.norm(real)
    assert np.linalg.norm(other.output - other.original_output) <= rtol * np.linalg.norm(real)


def test_the_one_dimensional_case_by_hand():
    # v = 0, 2, 1 (d_head 1): A = [[0, 2, 1], [1, 1, 1]], null space along (1, 1, −2).
    # w = (0.1, 0.15, 0.75) gives 1.05; raising source 1 over the top (source 2) as far as it
    # goes ends at (0.475, 0.525, 0); w′ is 0.99 of the way there
    v = np.array([[0.0], [2.0], [1.0]], np.float32)
    w = np.array([0.1, 0.15, 0.75], np.float32)
    other = same_output_weighting(w, v)
    end = np.array([0.475, 0.525, 0.0])
    np.testing.assert_allclose(other.weights, w + 0.99 * (end - w), atol=1e-7)
    assert (other.original_top, other.top, other.target) == (2, 1, 1) and other.top_changed
    _assert_valid(other, w, v)


@pytest.mark.parametrize("seed", range(12))
def test_random_heads_with_more_keys_than_d_head_plus_one(seed):
    rng = np.random.default_rng(seed)
    d_head = int(rng.integers(2, 12))
    n = int(rng.integers(d_head + 2, 4 * d_head + 10))
    v = rng.normal(size=(n, d_head)).astype(np.float32)
    w = _softmax(rng.normal(scale=2.0, size=n))
    other = same_output_weighting(w, v)
    _assert_valid(other, w, v)
    assert other.weights[other.top] == other.weights.max()


def test_masked_keys_stay_at_zero():
    rng = np.random.default_rng(3)
    v = rng.normal(size=(12, 3)).astype(np.float32)
    w = np.full(12, np.nan, np.float32)
    w[:8] = _softmax(rng.normal(size=8))             # a causal row: 8 keys read, 4 blocked
    other = same_output_weighting(w, v)
    _assert_valid(other, w, v)
    assert np.all(other.weights[8:] == 0)


def test_no_other_weighting_when_the_keys_are_few_and_independent():
    rng = np.random.default_rng(4)
    v = rng.normal(size=(6, 5)).astype(np.float32)            # n = 6 ≤ d_head + 1
    w = _softmax(rng.normal(size=6))
    assert same_output_weighting(w, v) is None
    recovery = recover_weights(w @ v, w, v)
    assert recovery.recoverable and recovery.rank == 6 and recovery.limit == 6
    assert recovery.max_error < 1e-4
    np.testing.assert_allclose(recovery.recovered, w, atol=1e-4)


def test_few_keys_with_a_repeated_value_are_not_recoverable():
    # two keys with the same value vector: moving weight between them changes nothing
    v = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], np.float32)
    w = np.array([0.2, 0.5, 0.3], np.float32)
    assert not recover_weights(w @ v, w, v).recoverable
    other = same_output_weighting(w, v)
    _assert_valid(other, w, v)
    assert other.top == 2                          # source 2 took source 1's place as the top


def test_recovery_fails_beyond_d_head_plus_one_keys():
    rng = np.random.default_rng(5)
    d_head = 4
    v = rng.normal(size=(20, d_head)).astype(np.float32)
    for n in range(2, 21):
        w = _softmax(rng.normal(size=n))
        recovery = recover_weights(w @ v[:n], w, v[:n])
        assert recovery.recoverable == (n <= d_head + 1), n
        if n <= d_head + 1:
            assert recovery.max_error < 1e-3, n
        else:
            assert recovery.max_error > 1e-3, n    # one solution of many, not w


def test_a_long_row_moves_only_its_most_weighted_keys():
    rng = np.random.default_rng(6)
    d_head = 3
    n = sum_readouts.max_keys(d_head) + 40
    v = rng.normal(size=(n, d_head)).astype(np.float32)
    w = _softmax(rng.normal(scale=2.0, size=n))
    other = same_output_weighting(w, v)
    _assert_valid(other, w, v)
    lightest = np.argsort(w)[:40]
    np.testing.assert_array_equal(other.weights[lightest], w[lightest].astype(np.float64))


def test_the_linear_program_by_hand():
    # max x0 + 2 x1 subject to x0 + x1 + x2 = 1, x0 − x1 = 0: x = (½, ½, 0)
    a = np.array([[1.0, 1.0, 1.0], [1.0, -1.0, 0.0]])
    x = linear_program(a, np.array([1.0, 0.0]), np.array([1.0, 2.0, 0.0]))
    np.testing.assert_allclose(x, [0.5, 0.5, 0.0], atol=1e-12)
    # infeasible: x0 + x1 = 1 and x0 + x1 = 2
    assert linear_program(np.array([[1.0, 1.0], [1.0, 1.0]]), np.array([1.0, 2.0]), np.ones(2)) is None


def test_survival_by_hand():
    rows = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    x, attn_out = np.array([3.0, 0.0]), np.array([0.0, 4.0])
    kept = survival(rows, x, attn_out)
    assert list(kept.tops) == [0, 2, 2] and kept.n_distinct_tops == 2
    assert kept.mean_head_distance == pytest.approx((1.0 + 1.0 + 0.0) / 3)
    assert kept.residual_cosine == pytest.approx(3 / 5)         # (3,0)·(3,4) / (3 · 5)
    assert kept.attention_ratio == pytest.approx(4 / 3)


@pytest.mark.parametrize("path", [None, str(FIXTURES / "gpt2_tiny"), str(FIXTURES / "bert_tiny")])
def test_every_head_of_a_real_pass(path):
    model = load_model(path)
    trace = model.trace(LONG)
    config, last = model.config, trace.n_seq - 1
    changed = 0
    for layer in range(config.n_layer):
        for head in range(config.n_head):
            answer = weighted_sum_answer(trace, layer, head, last)
            w = trace.head_array("attn_weights", layer, head)[last]
            assert answer.n_keys == np.count_nonzero(np.nan_to_num(w) > 0) > config.d_head + 1
            assert answer.null_dimension >= answer.n_keys - (config.d_head + 1)
            assert not answer.recovery.recoverable
            # a head almost all on one key leaves every equivalent weighting close to w
            _assert_valid(answer.other, w, trace.head_array("v", layer, head), least_change=0.0)
            out = trace.head_array("head_outputs", layer, head)[last].astype(np.float64)
            assert np.linalg.norm(answer.other.output - out) <= 1e-5 * np.linalg.norm(out)
            changed += answer.other.top_changed
            if config.causal:                          # an early query reads few enough keys
                short = answer.short_recovery
                assert answer.short_position == config.d_head and short.recoverable
                assert short.max_error < 1e-3
    assert changed > 0                                  # some head's top source can be another word
