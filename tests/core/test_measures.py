"""core/measures.py: cosines, nearest rows, the 2-D projection, where two curves part."""
import numpy as np
import pytest

from transformer_stepper.core import measures


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
