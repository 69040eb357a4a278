"""A big model opened lazily and traced: open time, RssAnon after open, first view (residual
stream + one layer's detail) and every layer's detail at several lengths, with peak RssAnon.
Hugging Face runs the same in its own process (tests/bench/hf_forward.py) when --hf-python
names a Python with torch and transformers.

    python tests/bench/bench_big.py MODEL_DIR [--tokens 128 512 2048] [--layer 5]
                                    [--hf-python PATH] [--all-layers] [--weight-budget MIB|free]

--weight-budget sets the bf16/fp16/GGUF weight cache: a number of MiB, or `free` for the app's
default from the memory free now (io/free_memory.py); the library's 768 MiB when absent.

Make the models with tests/bench/make_big_models.py."""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from memory import peak_rss_anon, rss_anon  # noqa: E402

from transformer_stepper import load_model  # noqa: E402
from transformer_stepper.runtime import tune_process  # noqa: E402


def token_ids(model, n: int):
    """n ids from a repeated sentence (special tokens as the tokenizer adds them)."""
    import numpy as np

    text = "The bank of the river was steep and green, and she went to the bank. " * (n // 8 + 8)
    ids = model.tokenizer.encode(text, max_length=10**6).input_ids[:n]
    return np.asarray(ids, dtype=np.int64)


def encoded(ids):
    """Token ids as the tokenizer's output (pieces named by their ids): no text to encode."""
    from transformer_stepper.core.model.tokenize import Encoded
    import numpy as np

    n = len(ids)
    return Encoded(tokens=tuple(str(i) for i in ids), input_ids=ids,
                   token_type_ids=np.zeros(n, np.int64), offsets=np.zeros((n, 2), np.int64),
                   special_tokens_mask=np.zeros(n, bool), truncated=False)


def traced(model, ids, layers, **options):
    return model.trace_encoded(encoded(ids), detail_layers=layers, **options)


def set_weight_budget(model, value) -> None:
    if value is None or not hasattr(model.params, "set_budget"):
        return
    if value == "free":
        from transformer_stepper.core.trace.trace import DEFAULT_DETAIL_BUDGET
        from transformer_stepper.io.free_memory import available_memory, default_weight_budget

        free = available_memory()
        model.params.set_budget(default_weight_budget(free, DEFAULT_DETAIL_BUDGET))
        print(f"free memory {free.nbytes / 2**20:,.0f} MiB ({free.source})" if free else "free memory unknown")
    else:
        model.params.set_budget(int(value) << 20)
    print(f"weight cache budget {model.params.budget / 2**20:,.0f} MiB")


def count_widened(model) -> list:
    """A list that gathers the bytes the weight store reads (and widens) from the files from now."""
    read: list = []
    ckpt = getattr(model.params, "ckpt", None)
    if ckpt is not None:
        get = getattr(ckpt.get, "__wrapped__", ckpt.get)

        def counted(name, *args, **kwargs):
            value = get(name, *args, **kwargs)
            read.append(value.nbytes)
            return value
        counted.__wrapped__ = get
        ckpt.get = counted
    return read


def cache_note(model) -> str:
    params = model.params
    if not hasattr(params, "budget"):
        return ""
    return f"; weight cache {params.nbytes_widened() / 2**20:,.0f} / {params.budget / 2**20:,.0f} MiB"


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("--tokens", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument("--layer", type=int, default=5)
    parser.add_argument("--all-layers", action="store_true", help="also time every layer's detail")
    parser.add_argument("--hf-python", help="a Python with torch + transformers for the HF column")
    parser.add_argument("--weight-budget", help="MiB of widened weights kept, or 'free' (the app's default)")
    args = parser.parse_args()
    tune_process()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS')}")
    base = rss_anon()
    start = time.perf_counter()
    model = load_model(args.model)
    opened = time.perf_counter() - start
    print(f"open {args.model.name}: {opened:.2f} s, RssAnon after open {(rss_anon() - base) / 2**20:.0f} MiB "
          f"beyond the interpreter ({model.n_params() / 1e9:.2f} B parameters)")
    set_weight_budget(model, args.weight_budget)
    layer = min(args.layer, model.config.n_layer - 1)
    print(f"{'tokens':>6} {'first view s':>12} {'peak MiB':>9} {'all layers s':>12} {'peak MiB':>9}"
          f" {'HF s':>7} {'HF peak MiB':>11}")
    for n in args.tokens:
        ids = token_ids(model, n)
        if len(ids) < n:
            print(f"{n}: the tokenizer gave only {len(ids)} ids")
            continue
        start = time.perf_counter()
        traced(model, ids[:16], (layer,))            # warm: weights paged in, caches
        print(f"warm-up pass (16 tokens) {time.perf_counter() - start:.2f} s{cache_note(model)}")
        before, widened = rss_anon(), count_widened(model)
        with peak_rss_anon() as peak:
            start, cpu = time.perf_counter(), time.process_time()
            trace = traced(model, ids, (layer,))
            first, cpu = time.perf_counter() - start, time.process_time() - cpu
        first_peak = (peak() - before) / 2**20
        row = f"{n:>6} {first:>12.2f} {first_peak:>9.0f}"
        note = f"; first view CPU {cpu:.2f} s (all threads), {sum(widened) / 2**30:.2f} GiB of weights read"
        if args.all_layers:
            with peak_rss_anon() as peak:
                start = time.perf_counter()
                for i in range(model.config.n_layer):
                    trace.prepare(i)
                every = time.perf_counter() - start + first
            row += f" {every:>12.2f} {(peak() - before) / 2**20:>9.0f}"
        else:
            row += f" {'-':>12} {'-':>9}"
        del trace
        if args.hf_python:
            out = subprocess.run([args.hf_python, str(HERE / "hf_forward.py"), "--model", str(args.model),
                                  "--tokens", str(n)], capture_output=True, text=True)
            if out.returncode == 0:
                hf = json.loads(out.stdout.strip().splitlines()[-1])
                row += f" {hf['forward_s']:>7.2f} {hf['peak_rss_anon_mib']:>11.0f}"
            else:
                row += f" HF failed: {out.stderr.strip().splitlines()[-1][:60]}"
        print(row + note + cache_note(model), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
