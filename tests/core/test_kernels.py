"""The compiled kernels (core/model/kernels.py, core/model/quantized.py) against the plain numpy reference:
each quant type's decoded tile equals gguf.quants.dequantize bit for bit, and each product
x @ W.T equals the float32 product of the dequantized matrix within float32 rounding.

The tolerance of a product: a float32 sum of d_in rounded products (each term and each partial
sum rounded once, in any order) is within (d_in + 1) * u * sum|x_k w_k| of the exact sum,
u = 2**-24 (Higham, Accuracy and Stability of Numerical Algorithms, 3.1). Both the kernel and
numpy's BLAS product are checked against the exact (float64) product of the same float32
weights with that bound, and the kernel's error must also be as small as float32 errors are
in practice (relative error of the whole product below 1e-5)."""
from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
numba = pytest.importorskip("numba")

from transformer_stepper.core.model import kernels, quantized  # noqa: E402
from transformer_stepper.core.model.quantized import QuantizedMatrix  # noqa: E402

U = 2.0 ** -24
KINDS = tuple(kernels.KINDS)
# byte offsets of each type's float16 scales inside a block (kept finite: a NaN's payload is
# not a number to compare)
HALVES = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
          "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


def random_codes(kind: str, n_rows: int, n_cols: int, seed: int) -> np.ndarray:
    """[n_rows, bytes] of random blocks: every code and sub-block scale occurs; the float16
    scales are random finite values of a weight's size (F16: random finite weights)."""
    rng = np.random.default_rng(seed)
    _, block_size, block_bytes = kernels.KINDS[kind]
    n_blocks = n_cols // block_size
    if kind == "F16":
        return (rng.standard_normal((n_rows, n_cols)) * 0.5).astype(np.float16).view(np.uint8)
    blocks = rng.integers(0, 256, (n_rows, n_blocks, block_bytes), dtype=np.uint8)
    for at in HALVES[kind]:
        scale = (rng.uniform(1e-4, 3e-2, (n_rows, n_blocks)) * rng.choice([-1, 1], (n_rows, n_blocks)))
        blocks[:, :, at:at + 2] = scale.astype(np.float16).view(np.uint8).reshape(n_rows, n_blocks, 2)
    return blocks.reshape(n_rows, n_blocks * block_bytes)


def reference(kind: str):
    qtype = getattr(gguf.GGMLQuantizationType, kind)

    def dequantize(codes: np.ndarray) -> np.ndarray:
        data = codes.view(np.float16) if kind == "F16" else codes
        return np.asarray(gguf.quants.dequantize(data, qtype), dtype=np.float32)
    return dequantize


@pytest.mark.parametrize("kind", KINDS)
def test_tile_equals_gguf_bit_for_bit(kind):
    codes = random_codes(kind, 37, 512, seed=1)
    expected = reference(kind)(codes)
    matrix = QuantizedMatrix(codes, kind, 512, reference(kind))
    assert np.array_equal(matrix.dequantize().view(np.uint32), expected.view(np.uint32))
    tile = np.empty((5, 512), np.float32)
    number, block_size, _ = kernels.KINDS[kind]
    kernels.dequantize_rows(number, block_size, codes[10:15], tile, kernels.half_table())
    assert np.array_equal(tile.view(np.uint32), expected[10:15].view(np.uint32))


def within_float32_rounding(y: np.ndarray, x: np.ndarray, w: np.ndarray) -> None:
    exact = x.astype(np.float64) @ w.astype(np.float64).T
    bound = (w.shape[1] + 1) * U * (np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64).T)
    assert (np.abs(y - exact) <= bound).all(), float((np.abs(y - exact) / bound).max())
    assert np.linalg.norm(y - exact) <= 1e-5 * np.linalg.norm(exact)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 12, 40])
def test_product_within_float32_rounding(kind, n):
    n_cols = 768 if kernels.KINDS[kind][1] == 256 else 352        # 3 K-blocks; 11 small ones
    codes = random_codes(kind, 65, n_cols, seed=2)
    w = reference(kind)(codes)
    x = np.random.default_rng(n).standard_normal((n, n_cols)).astype(np.float32)
    y = QuantizedMatrix(codes, kind, n_cols, reference(kind)).times_transposed(x)
    assert y.shape == (n, 65) and y.dtype == np.float32
    within_float32_rounding(y, x, w)
    within_float32_rounding(x @ w.T, x, w)               # the bound holds numpy's product too


@pytest.mark.parametrize("n", [1, 40])
def test_many_tiles_and_both_threads(monkeypatch, n):
    # a tile smaller than the matrix: the rows are split between tiles and threads, each row
    # computed once, in its place
    monkeypatch.setattr(quantized, "TILE_WEIGHTS", 256 * 3)
    codes = random_codes("Q4_K", 50, 512, seed=3)
    w = reference("Q4_K")(codes)
    x = np.random.default_rng(4).standard_normal((n, 512)).astype(np.float32)
    within_float32_rounding(QuantizedMatrix(codes, "Q4_K", 512, reference("Q4_K")).times_transposed(x), x, w)


def test_numpy_fallback_without_numba(monkeypatch):
    # where numba cannot be imported the reference dequantizer decodes the tiles
    monkeypatch.setattr(quantized, "kernels", lambda: None)
    codes = random_codes("Q6_K", 20, 512, seed=5)
    w = reference("Q6_K")(codes)
    matrix = QuantizedMatrix(codes, "Q6_K", 512, reference("Q6_K"))
    assert np.array_equal(matrix.dequantize(), w)
    for n in (1, 9):
        x = np.random.default_rng(n).standard_normal((n, 512)).astype(np.float32)
        within_float32_rounding(matrix.times_transposed(x), x, w)


def test_rows_of_the_wrong_length_are_refused():
    with pytest.raises(ValueError, match="Q4_K"):
        QuantizedMatrix(np.zeros((4, 100), np.uint8), "Q4_K", 256, reference("Q4_K"))


@pytest.mark.parametrize("n", [1, 5, 40])
def test_threads_give_the_serial_numbers_bit_for_bit(monkeypatch, n):
    # however the rows and tiles are shared out between threads (each thread takes the next
    # piece when done), every output column is computed by the same kernel call on the same
    # rows: the product equals the one-thread product exactly
    monkeypatch.setattr(quantized, "TILE_WEIGHTS", 256 * 3)
    codes = random_codes("Q4_K", 70, 512, seed=6)
    x = np.random.default_rng(7).standard_normal((n, 512)).astype(np.float32)
    matrix = QuantizedMatrix(codes, "Q4_K", 512, reference("Q4_K"))
    monkeypatch.setattr(quantized, "threads", lambda: 4)
    shared = matrix.times_transposed(x)
    monkeypatch.setattr(quantized, "threads", lambda: 1)
    serial = matrix.times_transposed(x)
    assert np.array_equal(shared.view(np.uint32), serial.view(np.uint32))
    within_float32_rounding(shared, x, reference("Q4_K")(codes))


@pytest.mark.parametrize("kind", ["Q4_K", "Q8_0", "Q6_K", "Q5_K"])
def test_whole_row_decoders_equal_gguf_on_many_blocks(kind):
    # the whole-row tile decoders of Q4_K, Q8_0, Q6_K and Q5_K (no per-block slices, codes
    # taken in float32 lanes) over rows of many blocks, every byte value in every position
    codes = random_codes(kind, 64, 4096, seed=8)
    tile = np.empty((64, 4096), np.float32)
    number, block_size, _ = kernels.KINDS[kind]
    kernels.dequantize_rows(number, block_size, codes, tile, kernels.half_table())
    assert np.array_equal(tile.view(np.uint32), reference(kind)(codes).view(np.uint32))

