import math

import numpy as np
import pytest

from transformer_stepper.core.model import ops


def test_softmax_rows_sum_to_one_and_masked_entries_are_zero():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(3, 5, 5)).astype(np.float32) * 10
    scores[:, ops.causal_mask(5)] = -np.inf
    weights = ops.softmax(scores)
    assert weights.dtype == np.float32
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    assert np.all(weights[:, ops.causal_mask(5)] == 0)


@pytest.mark.parametrize("blocked", [ops.causal_mask(6), ops.windowed_causal_mask(6, 3)])
def test_the_additive_mask_and_the_blocked_positions_undo_each_other(blocked):
    additive = ops.additive_mask(blocked)
    assert additive.dtype == np.float32
    np.testing.assert_array_equal(ops.blocked_positions(additive), blocked)


def test_erf_matches_math_erf():
    x = np.linspace(-6, 6, 2001, dtype=np.float32)
    expected = np.array([math.erf(float(v)) for v in x])
    assert ops.erf(x).dtype == np.float32
    np.testing.assert_allclose(ops.erf(x), expected, atol=5e-7)  # A&S bound 1.5e-7 + float32 rounding


def test_gelus_match_their_definitions():
    x = np.linspace(-8, 8, 1001, dtype=np.float32)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(float)])
    tanh = 0.5 * x.astype(float) * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.astype(float) ** 3)))
    np.testing.assert_allclose(ops.gelu_erf(x), exact, atol=2e-6)
    np.testing.assert_allclose(ops.gelu_tanh(x), tanh, atol=2e-6)
    assert ops.gelu_erf(x).dtype == ops.gelu_tanh(x).dtype == np.float32


def test_layer_norm_normalized_part_has_mean_zero_variance_one():
    rng = np.random.default_rng(1)
    x = rng.normal(3, 5, size=(7, 16)).astype(np.float32)
    g, b = rng.normal(size=16).astype(np.float32), rng.normal(size=16).astype(np.float32)
    normalized, out = ops.layer_norm(x, g, b, 1e-5)
    np.testing.assert_allclose(normalized.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(normalized.var(-1), 1, atol=1e-3)
    np.testing.assert_allclose(out, normalized * g + b, rtol=1e-6)


def test_sinusoid_table_follows_the_paper():
    table = ops.sinusoid_table(50, 8)
    pos, i = 7, 1
    assert table[pos, 2 * i] == pytest.approx(math.sin(pos / 10000 ** (2 * i / 8)), abs=1e-6)
    assert table[pos, 2 * i + 1] == pytest.approx(math.cos(pos / 10000 ** (2 * i / 8)), abs=1e-6)
    assert table.dtype == np.float32


def test_heads_split_and_merge_round_trip():
    x = np.arange(4 * 12, dtype=np.float32).reshape(4, 12)
    heads = ops.split_heads(x, 3)
    assert heads.shape == (3, 4, 4)
    np.testing.assert_array_equal(heads[1, 2], x[2, 4:8])
    np.testing.assert_array_equal(ops.merge_heads(heads), x)
