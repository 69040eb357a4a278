"""The compiled kernels' rates against gguf-py's numpy dequantizer, on one core (CPU time: the
machine may be shared): a 4,096 x 4,096 matrix of random blocks per type; the numpy dequantize,
the compiled tile decode, and one row of x times the matrix straight from the blocks. Then, for
a few rows of x (an edit near the end), the three product paths of core/model/quantized.py
side by side: tiles of 256 rows and BLAS, 4 stored rows at a time (some_rows_product), and the
register kernel (few_rows_product); the fastest of 5 runs each. Last, the tiled path's two steps
at an 8B model's shapes (--tile-rows): one tile decoded, and BLAS multiplying rows of x by it,
against BLAS's rate on a large square product.

    python tests/bench/bench_kernels.py [--rows 2 4 8 12 16] [--tile-rows 16 32 64 128] [--tiles-only]"""
from __future__ import annotations

import argparse
import time

import numpy as np


def cpu_seconds(run, reps: int = 2) -> float:
    run()
    start = time.process_time()
    for _ in range(reps):
        run()
    return (time.process_time() - start) / reps


def fastest(run, reps: int = 5) -> float:
    run()
    best = float("inf")
    for _ in range(reps):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def random_blocks(kind: str, rows: int, cols: int, rng) -> np.ndarray:
    from transformer_stepper.core.model import kernels
    scales = {"Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "Q8_0": (0,)}[kind]
    _, block_size, block_bytes = kernels.KINDS[kind]
    codes = rng.integers(0, 256, (rows, cols // block_size * block_bytes), dtype=np.uint8)
    for at in scales:                                   # finite float16 scales
        codes.reshape(rows, -1, block_bytes)[:, :, at:at + 2] = np.array([0.01], np.float16).view(np.uint8)
    return codes


def few_rows(row_counts) -> None:
    from transformer_stepper.core.model import kernels
    half, rng, rows, cols, step = kernels.half_table(), np.random.default_rng(1), 1024, 4096, 256
    for kind in ("Q4_K", "Q6_K", "Q5_K"):
        number, block_size, _ = kernels.KINDS[kind]
        codes = random_blocks(kind, rows, cols, rng)
        tile = np.empty((step, cols), np.float32)
        for n in row_counts:
            x, y = rng.standard_normal((n, cols), dtype=np.float32), np.empty((n, rows), np.float32)
            part = np.empty((n, step), np.float32)

            def tiled():
                for start in range(0, rows, step):
                    kernels.dequantize_rows(number, block_size, codes[start:start + step], tile, half)
                    np.matmul(x, tile.T, out=part)
                    y[:, start:start + step] = part
            rates = [rows * cols / 1e9 / fastest(run) for run in (
                tiled, lambda: kernels.some_rows_product(number, block_size, codes, x, y, half),
                lambda: kernels.few_rows_product(number, block_size, codes, x, y, half))]
            print(f"{kind}, {n} rows of x: tiles + BLAS {rates[0]:.2f}, 4 stored rows at a time {rates[1]:.2f}, "
                  f"register kernel {rates[2]:.2f} G weights/s (CPU time, one core)")


def tile_rates(row_counts) -> None:
    """Tiles as core/model/quantized.py's _tiled makes them for a Llama-3-8B-shaped Q4_K_M
    (TILE_WEIGHTS weights: Q4_K 256 x 4,096 as in q, k, v, o, gate and up; Q6_K 73 x 14,336 as in
    ffn_down of the layers given more bits), one thread: the decode, BLAS's product of n rows of
    x with the decoded tile (in cache, as in the pass), and both together."""
    from transformer_stepper.core.model import kernels
    from transformer_stepper.core.model.quantized import TILE_WEIGHTS
    half, rng = kernels.half_table(), np.random.default_rng(2)
    square = rng.standard_normal((1024, 1024), dtype=np.float32)
    peak = 2 * 1024 ** 3 / 1e9 / fastest(lambda: square @ square)
    print(f"BLAS 1,024 x 1,024 x 1,024: {peak:.1f} GFLOP/s (CPU time, one thread): the best it does here")
    for kind, cols in (("Q4_K", 4096), ("Q6_K", 14336)):
        number, block_size, _ = kernels.KINDS[kind]
        step = TILE_WEIGHTS // cols
        codes = random_blocks(kind, step, cols, rng)
        tile = np.empty((step, cols), np.float32)
        decode = fastest(lambda: kernels.dequantize_rows(number, block_size, codes, tile, half))
        print(f"{kind} tile {step} x {cols}: decode {step * cols / 1e9 / decode:.2f} G weights/s")
        for n in row_counts:
            x, part = rng.standard_normal((n, cols), dtype=np.float32), np.empty((n, step), np.float32)
            product = fastest(lambda: np.matmul(x, tile.T, out=part))
            flop = 2 * n * step * cols / 1e9
            print(f"  {n} rows of x: BLAS {flop / product:.1f} GFLOP/s ({flop / product / peak:.0%} of the square "
                  f"product's), decode and BLAS {flop / (product + decode):.1f} GFLOP/s; the decode "
                  f"{decode / (product + decode):.0%} of the tile's time")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[2, 4, 8, 12, 16])
    parser.add_argument("--tile-rows", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--tiles-only", action="store_true", help="only the tiles' rates")
    args = parser.parse_args()
    import gguf
    from transformer_stepper.core.model import kernels
    from transformer_stepper.core.model.blas import set_blas_threads

    set_blas_threads(1)
    if args.tiles_only:
        tile_rates(args.tile_rows)
        return 0
    half, rng = kernels.half_table(), np.random.default_rng(0)
    rows = cols = 4096
    for kind in ("Q4_K", "Q5_K", "Q6_K", "Q8_0"):
        number, block_size, _ = kernels.KINDS[kind]
        codes = random_blocks(kind, rows, cols, rng)
        qtype = getattr(gguf.GGMLQuantizationType, kind)
        tile = np.empty((256, cols), np.float32)            # as the product's tiles: 4 MiB, in cache
        x, y = rng.standard_normal((1, cols), dtype=np.float32), np.empty((1, rows), np.float32)

        def tiles():
            for start in range(0, rows, 256):
                kernels.dequantize_rows(number, block_size, codes[start:start + 256], tile, half)
        numpy_s = cpu_seconds(lambda: gguf.quants.dequantize(codes, qtype))
        tile_s = cpu_seconds(tiles)
        row_s = cpu_seconds(lambda: kernels.few_rows_product(number, block_size, codes, x, y, half))
        n = rows * cols / 1e9
        print(f"{kind}: gguf-py numpy dequantize {n / numpy_s:.2f} G weights/s; compiled tile {n / tile_s:.2f}; "
              f"one row times the matrix from the blocks {n / row_s:.2f} (CPU time, one core)")
    few_rows(args.rows)
    tile_rates(args.tile_rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
