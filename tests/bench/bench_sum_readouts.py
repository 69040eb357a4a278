"""How long the weighted sum's answer takes (core/analysis/sum_readouts.py): another weighting with the
same output (linear programs over at most max_keys(d_head) keys, up to MAX_TRIES of them) and
the recovery, on random heads of the shapes of the built-in model, GPT-2 and MiniLM.

    PYTHONPATH=desktop python tests/bench/bench_sum_readouts.py
"""
import time

import numpy as np

from transformer_stepper.core.analysis.sum_readouts import recover_weights, same_output_weighting


def main() -> None:
    rng = np.random.default_rng(0)
    for d_head, n_keys in ((16, 49), (16, 128), (32, 50), (64, 200), (64, 1000), (128, 2000)):
        times, changed = [], 0
        for _ in range(5):
            v = rng.normal(size=(n_keys, d_head)).astype(np.float32)
            w = rng.dirichlet(np.full(n_keys, 0.3)).astype(np.float32)
            start = time.perf_counter()
            other = same_output_weighting(w, v)
            recover_weights(w @ v, w, v)
            times.append(time.perf_counter() - start)
            changed += bool(other is not None and other.top_changed)
        print(f"d_head {d_head:4d}, {n_keys:5d} keys: median {1000 * np.median(times):7.1f} ms, "
              f"worst {1000 * max(times):7.1f} ms; another top source in {changed}/5")


if __name__ == "__main__":
    main()
