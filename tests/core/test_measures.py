"""core/model/measures.py: cosines, nearest rows, the 2-D projection, where two curves part."""
import numpy as np
import pytest

from transformer_stepper.core.model import measures
from tests.core.test_architectures import make


def test_cosine_rows_of_parallel_opposite_and_orthogonal_rows():
    a = np.array([[1.0, 2.0, 3.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
    b = np.array([[2.0, 4.0, 6.0], [-3.0, 0.0, 0.0], [5.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert measures.cosine_rows(a, b) == pytest.approx([1.0, -1.0, 0.0, 0.0])


def test_cosine_matrix_is_symmetric_with_unit_diagonal():
    x = np.random.default_rng(0).normal(size=(6, 5))
    m = measures.cosine_matrix(x)
    assert np.allclose(m, m.T) and np.allclose(np.diag(m), 1.0)
    assert m[1, 4] == pytest.approx(x[1] @ x[4] / np.linalg.norm(x[1]) / np.linalg.norm(x[4]))


def test_nearest_rows_best_first():
    table = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    ids, cosines = measures.nearest_rows(table, np.linalg.norm(table, axis=1), np.array([1.0, 0.1]), 3)
    assert ids.tolist() == [0, 2, 1]
    assert np.all(np.diff(cosines) <= 0)


def test_nearest_in_pool_skips_excluded_rows_and_pads():
    pool = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    queries = np.array([[1.0, 0.0], [0.0, 1.0]])
    excluded = np.array([[True, False, False], [False, False, True]])
    idx, cos = measures.nearest_in_pool(pool, queries, k=4, excluded=excluded)
    assert idx[0].tolist() == [1, 2, -1, -1]
    assert idx[1].tolist() == [1, 0, -1, -1]
    assert cos[0, 0] == pytest.approx(0.9 / np.hypot(0.9, 0.1))
    assert np.isnan(cos[0, 2:]).all()


def _exact_pca(x, k):
    centred = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    return vt[:k], (s[:k] ** 2) / (s ** 2).sum()


@pytest.mark.parametrize("shape", [(240, 384), (12, 64), (30, 8), (9, 200)])
def test_principal_axes_match_exact_pca(shape):
    rng = np.random.default_rng(1)
    n, d = shape
    # a few strong directions plus noise: what hidden states look like to PCA
    x = rng.normal(size=(n, 4)) * [9.0, 5.0, 2.0, 1.0] @ rng.normal(size=(4, d)) + 0.3 * rng.normal(size=(n, d))
    mean, axes, explained = measures.principal_axes(x, 2)
    exact, ratio = _exact_pca(x, 2)
    assert np.allclose(mean, x.mean(axis=0))
    assert np.allclose(axes @ axes.T, np.eye(2), atol=1e-9)
    for got, want in zip(axes, exact):
        assert abs(float(got @ want)) == pytest.approx(1.0, abs=1e-6)
    assert explained == pytest.approx(ratio, rel=1e-6)


def test_principal_axes_sign_is_deterministic():
    x = np.random.default_rng(2).normal(size=(50, 20))
    _, axes, _ = measures.principal_axes(x, 2)
    for axis in axes:
        assert axis[np.argmax(np.abs(axis))] > 0
    _, again, _ = measures.principal_axes(x.copy(), 2)
    assert np.array_equal(axes, again)


def test_principal_axes_of_constant_rows_is_zero():
    mean, axes, explained = measures.principal_axes(np.ones((5, 3)), 2)
    assert np.array_equal(axes, np.zeros((2, 3))) and np.array_equal(explained, [0.0, 0.0])


def test_project_and_align_signs():
    x = np.random.default_rng(3).normal(size=(20, 6))
    mean, axes, _ = measures.principal_axes(x, 2)
    coords = measures.project(x, mean, axes)
    assert coords.shape == (20, 2)
    flipped = coords * [-1.0, 1.0]
    assert measures.align_signs(flipped, coords).tolist() == [-1.0, 1.0]


def test_parting_index_and_largest_drop():
    cosines = np.array([0.90, 0.88, 0.80, 0.55, 0.57])
    assert measures.parting_index(cosines, 0.05) == 2
    assert measures.parting_index(cosines, 0.5) is None
    assert measures.largest_drop(cosines) == (3, pytest.approx(0.25))


def test_inputs_are_not_written():
    x = np.random.default_rng(4).normal(size=(10, 5))
    x.flags.writeable = False
    measures.principal_axes(x)
    measures.nearest_in_pool(x, x[:2], 3)
    measures.cosine_rows(x, x)


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


# -- what the stage views plot (moved from the UI, where they had no tests) ----------------------
def test_robust_limit_ignores_a_handful_of_outliers_and_non_finite_values():
    values = np.concatenate([np.linspace(-1, 1, 2001), [500.0, -800.0, np.inf, np.nan]]).astype(np.float32)
    limit = measures.robust_limit(values)
    assert 0.98 <= limit <= 1.0
    assert measures.robust_limit(np.array([np.nan, np.inf])) == 1.0
    assert measures.robust_limit(np.zeros(10)) == 1.0
    assert measures.robust_limit(np.array([0.0] * 999 + [3.0])) == 3.0   # all-zero percentile


def test_softmax_with_temperature_sharpens_and_flattens_and_keeps_masked_zero():
    scores = np.array([[1.0, 2.0, -np.inf]], np.float32)
    for t in (0.5, 1.0, 4.0):
        w = measures.softmax_with_temperature(scores, t)
        expected = np.exp(scores[0, :2] / t) / np.exp(scores[0, :2] / t).sum()
        np.testing.assert_allclose(w[0, :2], expected, rtol=1e-6)
        assert w[0, 2] == 0.0 and w.dtype == np.float32
    assert measures.softmax_with_temperature(scores, 0.5)[0, 1] > measures.softmax_with_temperature(scores, 4.0)[0, 1]


def test_contributions_sum_to_the_weighted_sum():
    rng = np.random.default_rng(0)
    w, v = rng.random(5).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    parts = measures.contributions(w, v)
    assert parts.shape == (5, 3)
    np.testing.assert_allclose(parts.sum(0), w @ v, rtol=1e-5)


def test_histogram_counts_every_finite_value_in_its_range():
    values = np.array([-2.0, -0.5, 0.0, 0.5, 2.0, np.nan])
    edges, counts = measures.histogram(values, bins=4, limit=1.0)
    np.testing.assert_allclose(edges, [-1, -0.5, 0, 0.5, 1])
    assert counts.tolist() == [0, 1, 1, 1]       # ±2 lie outside ±1; NaN is dropped
    edges, counts = measures.histogram(values, bins=4)
    assert edges[0] == -2 and edges[-1] == 2 and counts.sum() == 5
    edges, counts = measures.histogram(np.array([np.nan]), bins=3)
    assert counts.sum() == 0 and len(edges) == 4


def test_top_k_probabilities_are_the_largest_softmax_values_best_first():
    logits = np.array([0.0, 3.0, 1.0, 2.0], np.float32)
    ids, p = measures.top_k_probabilities(logits, 2)
    assert ids.tolist() == [1, 3]
    full = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(p, full[[1, 3]], rtol=1e-6)
    assert len(measures.top_k_probabilities(logits, 10)[0]) == 4


def test_rms_per_dim_is_the_root_mean_square_over_tokens():
    x = np.array([[3.0, 0.0], [4.0, 0.0]], np.float32)
    np.testing.assert_allclose(measures.rms_per_dim(x), [np.sqrt(12.5), 0.0])


def test_token_labels_show_byte_level_spaces_and_the_default_token_is_an_ordinary_one():
    from tests.core.test_forward import make_model
    from transformer_stepper.core.analysis.labels import default_token, token_labels

    gpt2 = make_model("gpt2")
    trace = gpt2.trace("the bank of\nthe river")
    labels = token_labels(trace, gpt2.tokenizer)
    assert len(labels) == trace.n_seq
    assert all("Ġ" not in label and "Ċ" not in label for label in labels)
    assert any(label.startswith("␣") for label in labels)
    assert default_token(trace) == trace.n_seq - 1           # causal: the last sees everything
    bert = make_model("bert")
    trace = bert.trace("the bank")
    assert trace.special_tokens_mask[0] and default_token(trace) == 1   # after [CLS]
