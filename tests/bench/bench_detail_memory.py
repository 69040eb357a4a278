"""Peak memory and time of the path to every layer's detail (the first pass with one layer
recorded, as the app does, then each layer prepared in turn), one length per process:

    python tests/bench/bench_detail_memory.py MODEL_DIR --tokens 512 [--budget-mib 1024]

Prints the wall time, the peak anonymous resident memory over the path (memory.py; not the
memory-mapped weights), the process's user and system CPU seconds and minor page faults over
the path, and the bytes of detail the trace keeps at the end. Run it with each side's desktop/
first on PYTHONPATH, each length in its own process (so one run's freed pages do not flatter
the next)."""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_big import cpu_name, encoded, token_ids, traced  # noqa: E402
from memory import peak_rss_anon, rss_anon  # noqa: E402

from transformer_stepper import load_model  # noqa: E402
from transformer_stepper.runtime import tune_process  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--budget-mib", type=int, default=1024)
    args = parser.parse_args()
    tune_process()
    model = load_model(args.model)
    config = model.config
    ids = token_ids(model, args.tokens)
    traced(model, ids[:16], (5,))                       # warm: imports, BLAS threads
    before = rss_anon()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with peak_rss_anon() as peak:
        start = time.perf_counter()
        encoded_layers = (min(5, config.n_layer - 1),)
        trace = model.trace_encoded(encoded(ids), detail_layers=encoded_layers,
                                    detail_budget=args.budget_mib << 20)
        for i in range(config.n_layer):
            trace.prepare(i)
        wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; {model.name}, {config.n_layer} layers, "
          f"{args.tokens} tokens, budget {args.budget_mib} MiB")
    print(f"every layer's detail: {wall:.2f} s wall, user {after.ru_utime - usage.ru_utime:.2f} s, "
          f"system {after.ru_stime - usage.ru_stime:.2f} s, "
          f"{after.ru_minflt - usage.ru_minflt} minor faults; peak RssAnon {peak() / 2**20:.0f} MiB "
          f"({(peak() - before) / 2**20:.0f} MiB above the start); detail kept "
          f"{trace.cache.nbytes() / 2**20:.0f} MiB in {len(trace.cache.layers())} layers", flush=True)
    return 0



if __name__ == "__main__":
    sys.exit(main())
