"""Every activation at every layer: TransformerLens' run_with_cache against the app's path to
every layer's detail (bench_every_layer.py: the first pass, then each layer prepared), each in
its own process per tool and length, rounds alternating which side runs first, best of the rounds.

    python tests/bench/bench_transformer_lens.py MODEL_DIR --tl-python /work/venv-tl/bin/python
                                                 [--tokens 128 512 1024] [--rounds 3]

MODEL_DIR is a GPT-2 folder (config.json, model.safetensors, tokenizer.json), e.g. the
GPT-2-small-shaped one from make_big_models.py. TransformerLens is never a dependency of the
app: --tl-python names a Python that has it (docs/performance.md: "TransformerLens comparison"); it runs
with HF_HUB_OFFLINE=1 and `TransformerBridge.boot_transformers(MODEL_DIR)` (float32, raw
weights: the same arithmetic as the app; no LayerNorm folding). Both sides get the same ids.

Per side and length: seconds for the call (after a 16-token warm-up), the peak RssAnon added
during it (the activations and their workspace: sampled every 5 ms, memory.py) and the process's
peak RSS (VmHWM: weights, libraries and all). The app keeps every layer's detail at once
(a detail budget of 1 TiB), as TransformerLens' cache does; `--app-budget-mib` sets another."""
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

from memory import peak_rss_anon, rss_anon  # noqa: E402

MiB = 2**20


def ids_of(n: int) -> list[int]:
    return [(i * 7919 + 13) % 50000 for i in range(n)]


def vm_hwm() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(run, n: int) -> dict:
    run(ids_of(16))                                     # warm: weights read, caches
    before = rss_anon()
    with peak_rss_anon() as peak:
        start, cpu = time.perf_counter(), time.process_time()
        held = run(ids_of(n))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_added_mib": (peak() - before) / MiB,
            "vm_hwm_mib": vm_hwm() / MiB, "held": held}


def tl_side(model: str, n: int) -> dict:
    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    from transformer_lens.model_bridge import TransformerBridge

    torch.set_grad_enabled(False)
    bridge = TransformerBridge.boot_transformers(model, device="cpu", dtype=torch.float32)

    def run(ids):
        _, cache = bridge.run_with_cache(torch.tensor([ids]))
        return len(cache)                               # (the cache lives until the call returns)
    figures = measure(run, n)
    figures["tool"] = f"TransformerLens {version('transformer_lens')}, torch {torch.__version__}, " \
                      f"{torch.get_num_threads()} threads"
    return figures


def app_side(model: str, n: int, budget_mib: int) -> dict:
    import numpy as np

    from bench_big import traced
    from transformer_stepper import load_model
    from transformer_stepper.runtime import tune_process

    tune_process()
    stepper = load_model(model)

    def run(ids):
        trace = traced(stepper, np.asarray(ids, np.int64), (min(5, stepper.config.n_layer - 1),),
                       detail_budget=budget_mib * MiB)
        for i in range(stepper.config.n_layer):
            trace.prepare(i)
        return len(trace.cache.layers())
    figures = measure(run, n)
    figures["tool"] = f"transformer_stepper, detail budget {budget_mib:,} MiB"
    return figures


def version(package: str) -> str:
    from importlib.metadata import version as of
    return of(package)


def one(args, side: str, n: int) -> dict:
    python = args.tl_python if side == "tl" else sys.executable
    out = subprocess.run([python, __file__, str(args.model), "--side", side, "--tokens", str(n),
                          "--app-budget-mib", str(args.app_budget_mib)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{side} at {n} tokens failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--tl-python", default="/work/venv-tl/bin/python")
    parser.add_argument("--tokens", type=int, nargs="+", default=[128, 512, 1024])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--app-budget-mib", type=int, default=1 << 20)
    parser.add_argument("--side", choices=("tl", "app"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        n = args.tokens[0]
        side = tl_side(str(args.model), n) if args.side == "tl" else app_side(str(args.model), n, args.app_budget_mib)
        print(json.dumps(side))
        return 0
    from bench_big import cpu_name
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}; {args.model}")
    for n in args.tokens:
        best: dict[str, dict] = {}
        for r in range(args.rounds):
            for side in (("tl", "app") if r % 2 == 0 else ("app", "tl")):
                got = one(args, side, n)
                keep = best.setdefault(side, got)
                for key in ("seconds", "cpu_seconds", "peak_added_mib", "vm_hwm_mib"):
                    keep[key] = min(keep[key], got[key])
        tl, app = best["tl"], best["app"]
        print(f"{n:>5} tokens  TL {tl['seconds']:.2f} s (CPU {tl['cpu_seconds']:.2f} s), "
              f"+{tl['peak_added_mib']:,.0f} MiB (VmHWM {tl['vm_hwm_mib']:,.0f}; {tl['held']} cached)  |  "
              f"app {app['seconds']:.2f} s (CPU {app['cpu_seconds']:.2f} s), +{app['peak_added_mib']:,.0f} MiB "
              f"(VmHWM {app['vm_hwm_mib']:,.0f}; {app['held']} layers)  |  app/TL: time "
              f"{app['seconds'] / tl['seconds']:.2f}, CPU {app['cpu_seconds'] / tl['cpu_seconds']:.2f}, "
              f"added {app['peak_added_mib'] / tl['peak_added_mib']:.2f}, VmHWM {app['vm_hwm_mib'] / tl['vm_hwm_mib']:.2f}; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"TL side: {best['tl']['tool']}; app side: {best['app']['tool']}; load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
