"""Where the CPU time of a pass over a GGUF model goes: the first view of N tokens and an edit
of the middle token, split into the decoding of the tiles (by quant type), BLAS's products of
the decoded tiles, the compiled few-row products, and the rest (attention, norms, Python, the
kernel's page faults on the mapped file), with the process's system time and minor page faults.
Each thread's CPU time is measured around the calls (time.thread_time), so the split holds on a
shared machine where wall times do not.

    python tests/bench/profile_products.py MODEL.gguf [--tokens 32] [--rounds 1]
        [--tile-weights 1048576 262144]

--tile-weights runs the views once per value of core/model/quantized.py's TILE_WEIGHTS, the
values alternated over the rounds in one process (the same mapped weights)."""
from __future__ import annotations

import argparse
import collections
import os
import resource
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_big import cpu_name, encoded, token_ids  # noqa: E402

NAMES = {5: "Q4_K", 7: "Q6_K", 6: "Q5_K", 4: "Q8_0", 8: "F16"}


class Counted:
    """A stand-in for core.model.kernels (and numpy) in core.model.quantized: every call of the
    named functions adds its thread's CPU time to `spent`."""

    def __init__(self, module, names, spent, lock, by_kind=()):
        self.module, self.names, self.spent, self.lock, self.by_kind = module, names, spent, lock, by_kind

    def __getattr__(self, name):
        function = getattr(self.module, name)
        if name not in self.names:
            return function

        def counted(*args, **kwargs):
            start = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                key = f"{name} {NAMES.get(args[0], args[0])}" if name in self.by_kind else name
                with self.lock:
                    self.spent[key] += time.thread_time() - start
        return counted


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tile-weights", type=int, nargs="+")
    args = parser.parse_args()
    from transformer_stepper import load_model
    from transformer_stepper.core.model import quantized
    from transformer_stepper.runtime import tune_process

    tune_process()
    spent, lock = collections.Counter(), threading.Lock()
    compiled = quantized.kernels()
    quantized._kernels = Counted(compiled, {"dequantize_rows", "few_rows_product", "some_rows_product"},
                                 spent, lock, by_kind={"dequantize_rows"})
    quantized.np = Counted(np, {"matmul"}, spent, lock)
    model = load_model(args.model)
    ids = token_ids(model, args.tokens + 1)
    n = args.tokens
    model.retrace(None, encoded(ids[:8]), detail_layers=(args.layer,)).logits_at(-1)   # every weight read once
    edited = np.array(ids[:n])
    edited[n // 2] = ids[n // 2 + 1] if ids[n // 2 + 1] != edited[n // 2] else edited[n // 2] + 1
    print(f"{args.model.name}; CPU {cpu_name()}; {n} tokens; load average {os.getloadavg()[0]:.1f}")

    def view(name, previous, these):
        spent.clear()
        usage, wall, cpu = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), time.process_time()
        trace = model.retrace(previous, encoded(these), detail_layers=(args.layer,))
        trace.logits_at(-1)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        after = resource.getrusage(resource.RUSAGE_SELF)
        parts = ", ".join(f"{key} {seconds:.2f}" for key, seconds in sorted(spent.items()))
        print(f"  {name}: wall {wall:.2f} s, CPU {cpu:.2f} s = {parts}, rest {cpu - sum(spent.values()):.2f}; "
              f"system {after.ru_stime - usage.ru_stime:.2f} s, minor faults {after.ru_minflt - usage.ru_minflt}",
              flush=True)
        return trace

    for round_number in range(args.rounds):
        for tile_weights in args.tile_weights or [quantized.TILE_WEIGHTS]:
            quantized.TILE_WEIGHTS = tile_weights
            print(f"round {round_number + 1}, TILE_WEIGHTS {tile_weights}")
            trace = view("first view", None, ids[:n])
            view("middle token changed", trace, edited)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
