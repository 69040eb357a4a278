"""Peak memory of re-tracing a long text whole while the old trace is alive (what the window
does when the first word changes), in the core alone, one budget per process:

    python tests/bench/bench_retrace_memory.py MODEL_DIR [--tokens 1002] [--budget-mib 1024]

The old trace is made as the window makes it after typing: a pass, a token typed at the end,
then every layer visited (each kept within the budget). Prints the anonymous resident memory
(RssAnon, memory.py: not the memory-mapped weights) above the start with the old trace, the
detail it keeps, and the peak while the new trace is made."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_big import cpu_name, encoded, token_ids  # noqa: E402
from memory import peak_rss_anon, rss_anon  # noqa: E402

from transformer_stepper import load_model  # noqa: E402
from transformer_stepper.runtime import tune_process  # noqa: E402

MiB = 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--tokens", type=int, default=1002)
    parser.add_argument("--budget-mib", type=int, default=1024)
    args = parser.parse_args()
    tune_process()
    model = load_model(args.model)
    ids = token_ids(model, args.tokens + 1)
    budget = args.budget_mib * MiB
    print(f"CPU: {cpu_name()}; load {os.getloadavg()[0]:.1f}; {model.name}, {args.tokens} tokens, "
          f"detail budget {args.budget_mib:,} MiB")
    base = rss_anon()
    old = model.trace_encoded(encoded(ids[:-1]), detail_budget=budget, detail_layers=(5,))
    old = model.retrace(old, encoded(ids), detail_layers=(5,))            # a token typed at the end
    for layer in range(model.config.n_layer):
        old.prepare(layer)
    print(f"old trace (typed at the end, every layer visited): RssAnon +{(rss_anon() - base) / MiB:,.0f} MiB, "
          f"detail {old.cache.nbytes() / MiB:,.0f} MiB in {len(old.cache.layers())} layers")
    edited = ids.copy()
    edited[0] = ids[1]                                                   # the first word changed
    with peak_rss_anon() as peak:
        new = model.retrace(old, encoded(edited), detail_layers=(5,))
    print(f"whole re-trace with the old trace alive: peak RssAnon +{(peak() - base) / MiB:,.0f} MiB; "
          f"the new trace keeps {new.cache.nbytes() / MiB:,.0f} MiB in {len(new.cache.layers())} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
