"""One generation step with the KV cache (core.trace.generate.step: only the new position is
computed in every layer) against re-tracing the whole extended text, at a given context length.

    python tests/bench/bench_generate.py [MODEL ...] [--tokens 500] [--repeat 5]

MODEL: a folder or file, or builtin (the default; a GPT-2-small-shaped model comes from
tests/bench/make_big_models.py). Prints the median of --repeat runs for each."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_big import cpu_name, token_ids, traced  # noqa: E402

from transformer_stepper import load_model  # noqa: E402
from transformer_stepper.core.trace.generate import Sampling, step  # noqa: E402
from transformer_stepper.runtime import tune_process  # noqa: E402


def median_seconds(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["builtin"], help="'builtin': the built-in model")
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tune_process()
    print(f"CPU: {cpu_name()}; context {args.tokens} tokens; "
          f"median of {args.repeat}")
    for path in args.models:
        model = load_model(None if path == "builtin" else path)
        n = min(args.tokens, model.config.n_ctx - 1)
        ids = token_ids(model, n)
        context = traced(model, ids, ())
        sampling = Sampling()
        cached = median_seconds(lambda: step(model, context, sampling), args.repeat)
        token = int(np.argmax(context.logits[-1]))
        full = median_seconds(lambda: traced(model, np.append(ids, token), ()), args.repeat)
        print(f"{model.name:32s} {n:5d} tokens  step with KV cache {1000 * cached:8.1f} ms   "
              f"full re-trace {1000 * full:8.1f} ms   {full / cached:5.1f}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
