"""A Llama-3.2-1B-shaped model from a Q4_K_M GGUF vs the same model from bf16 safetensors, each
side in its own process, the sides alternated over rounds (the machine is shared: ranges, not
one figure). Per side: open time and RssAnon after open; the first view of 128 tokens (residual
stream + one layer's detail, every weight read for the first time) and its peak RssAnon at the
default weight-cache budget; then, with a budget that holds the whole model, the first view
again (filling the cache) and the next keystroke (one more token typed at the end: Model.retrace).

    python tests/bench/make_big_models.py DIR --only llama        # bf16 folder (2.5 GB)
    python tests/bench/make_big_models.py DIR --only llama_gguf   # Q4_K_M GGUF of it (0.8 GB)
    python tests/bench/bench_gguf.py DIR [--rounds 3] [--tokens 128] [--big-budget-mib 6144]

Targets (issue 27): GGUF open <= 1 s with <= 0.3 GB RssAnon; first view <= 2.5x bf16; next
keystroke <= 1.2x bf16 with a cache that holds the model; peak RssAnon <= 1.5 GB at the default
budget."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_big import cpu_name, encoded, token_ids, traced  # noqa: E402
from memory import peak_rss_anon, rss_anon  # noqa: E402

SIDES = {"gguf": "llama_1b_q4_k_m.gguf", "bf16": "llama_1b_shaped"}
MIB = 2**20


def one_side(path: Path, n_tokens: int, layer: int, big_budget: int) -> dict:
    from transformer_stepper import load_model
    from transformer_stepper.runtime import tune_process

    tune_process()
    base = rss_anon()
    start = time.perf_counter()
    model = load_model(path)
    out = {"open_s": time.perf_counter() - start, "open_rss_mib": (rss_anon() - base) / MIB,
           "default_budget_mib": model.params.budget / MIB}
    ids = token_ids(model, n_tokens + 1)
    with peak_rss_anon() as peak:
        start = time.perf_counter()
        trace = traced(model, ids[:n_tokens], (layer,))
        out["first_view_s"] = time.perf_counter() - start
    out["peak_rss_mib"] = (peak() - base) / MIB

    def keystroke(previous):
        start = time.perf_counter()
        model.retrace(previous, encoded(ids), detail_layers=(layer,))
        return time.perf_counter() - start

    out["keystroke_default_budget_s"] = keystroke(trace)
    model.params.set_budget(big_budget)
    start = time.perf_counter()
    trace = traced(model, ids[:n_tokens], (layer,))
    out["first_view_big_budget_s"] = time.perf_counter() - start
    out["held_mib"] = model.params.nbytes_widened() / MIB
    out["keystroke_s"] = min(keystroke(trace) for _ in range(3))
    return out


def _range(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if f"{low:{fmt}}" == f"{high:{fmt}}" else f"{low:{fmt}}–{high:{fmt}}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--layer", type=int, default=5)
    parser.add_argument("--big-budget-mib", type=int, default=6144)
    parser.add_argument("--side", choices=tuple(SIDES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        result = one_side(args.folder / SIDES[args.side], args.tokens, args.layer, args.big_budget_mib * MIB)
        print(json.dumps(result))
        return 0
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at start")
    results: dict[str, list[dict]] = {side: [] for side in SIDES}
    for round_number in range(args.rounds):
        order = list(SIDES) if round_number % 2 == 0 else list(SIDES)[::-1]
        for side in order:
            run = subprocess.run([sys.executable, __file__, str(args.folder), "--side", side,
                                  "--tokens", str(args.tokens), "--layer", str(args.layer),
                                  "--big-budget-mib", str(args.big_budget_mib)],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{side} failed: {run.stderr.strip().splitlines()[-1:]}")
                return 1
            results[side].append(json.loads(run.stdout.strip().splitlines()[-1]))
            print(f"round {round_number + 1} {side}: {results[side][-1]}", flush=True)
    rows = (("open s", "open_s", ".2f"), ("RssAnon after open MiB", "open_rss_mib", ".0f"),
            (f"first view {args.tokens} tokens s", "first_view_s", ".2f"),
            ("peak RssAnon MiB (default budget)", "peak_rss_mib", ".0f"),
            ("next keystroke s (default budget)", "keystroke_default_budget_s", ".2f"),
            ("first view s (big budget)", "first_view_big_budget_s", ".2f"),
            ("weights held MiB (big budget)", "held_mib", ".0f"),
            ("next keystroke s (big budget)", "keystroke_s", ".3f"))
    print(f"\n{'':38} {'GGUF Q4_K_M':>14} {'bf16':>14} {'ratio (median)':>15}")
    for label, key, fmt in rows:
        g, b = [r[key] for r in results["gguf"]], [r[key] for r in results["bf16"]]
        ratio = sorted(g)[len(g) // 2] / max(sorted(b)[len(b) // 2], 1e-9)
        print(f"{label:38} {_range(g, fmt):>14} {_range(b, fmt):>14} {ratio:>15.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
