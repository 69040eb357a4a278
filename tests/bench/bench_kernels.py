"""The compiled kernels' rates against gguf-py's numpy dequantizer, on one core (CPU time: the
machine may be shared): a 4,096 x 4,096 matrix of random blocks per type; the numpy dequantize,
the compiled tile decode, and one row of x times the matrix straight from the blocks.

    python tests/bench/bench_kernels.py"""
from __future__ import annotations

import time

import numpy as np


def cpu_seconds(run, reps: int = 2) -> float:
    run()
    start = time.process_time()
    for _ in range(reps):
        run()
    return (time.process_time() - start) / reps


def main() -> int:
    import gguf
    from transformer_stepper.core.model import kernels
    from transformer_stepper.core.model.blas import set_blas_threads

    set_blas_threads(1)
    half, rng = kernels.half_table(), np.random.default_rng(0)
    rows = cols = 4096
    for kind, scales in (("Q4_K", (0, 2)), ("Q5_K", (0, 2)), ("Q6_K", (208,)), ("Q8_0", (0,))):
        number, block_size, block_bytes = kernels.KINDS[kind]
        codes = rng.integers(0, 256, (rows, cols // block_size * block_bytes), dtype=np.uint8)
        for at in scales:                                   # finite float16 scales
            codes.reshape(rows, -1, block_bytes)[:, :, at:at + 2] = np.array([0.01], np.float16).view(np.uint8)
        qtype = getattr(gguf.GGMLQuantizationType, kind)
        tile = np.empty((rows, cols), np.float32)
        x, y = rng.standard_normal((1, cols), dtype=np.float32), np.empty((1, rows), np.float32)
        numpy_s = cpu_seconds(lambda: gguf.quants.dequantize(codes, qtype))
        tile_s = cpu_seconds(lambda: kernels.dequantize_rows(number, block_size, codes, tile, half))
        row_s = cpu_seconds(lambda: kernels.few_rows_product(number, block_size, codes, x, y, half))
        n = rows * cols / 1e9
        print(f"{kind}: gguf-py numpy dequantize {n / numpy_s:.2f} G weights/s; compiled tile {n / tile_s:.2f}; "
              f"one row times the matrix from the blocks {n / row_s:.2f} (CPU time, one core)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
