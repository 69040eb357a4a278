"""The app's path to every layer's detail (the first pass, then each layer visited) against
the floor: the pass's matrix products alone in numpy (gemm_limit.py), in the same process.

    python tests/bench/bench_every_layer.py MODEL_DIR [--tokens 128 512] [--repeat 3]

Prints, per length: the floor, the first pass (layer 5 recorded, as the app does), the path to
every layer's detail (first pass + prepare each layer: what a walk through every layer costs),
how many layers had to be computed after the pass, and both as ratios to the floor (best of
`repeat`). Run it with each side's desktop/ first on PYTHONPATH, in separate processes."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gemm_limit  # noqa: E402
from bench_big import cpu_name, token_ids, traced  # noqa: E402
from bench_core import numpy_randn, products_of  # noqa: E402

import numpy as np  # noqa: E402

from transformer_stepper import load_model  # noqa: E402
from transformer_stepper.runtime import tune_process  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("--tokens", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tune_process()
    model = load_model(args.model)
    config = model.config
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; {model.name}, {config.n_layer} layers")
    for n in args.tokens:
        ids = token_ids(model, n)
        floor = sum(gemm_limit.gemm_seconds(products_of(config, n), config.n_layer, numpy_randn,
                                            np.matmul, lambda a: np.swapaxes(a, -1, -2), repeats=3).values())
        traced(model, ids[:16], (5,))                       # warm
        firsts, everys, computed = [], [], 0
        for _ in range(args.repeat):
            start = time.perf_counter()
            trace = traced(model, ids, (min(5, config.n_layer - 1),))
            firsts.append(time.perf_counter() - start)
            for i in range(config.n_layer):
                trace.prepare(i)
            everys.append(time.perf_counter() - start)
            computed = trace.cache.computed
            del trace
        first, every = min(firsts), min(everys)
        print(f"{n:>5} tokens: floor {floor:.2f} s; first pass {first:.2f} s ({first / floor:.2f}x); "
              f"every layer {every:.2f} s ({every / floor:.2f}x), {computed} layers computed after the pass",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
