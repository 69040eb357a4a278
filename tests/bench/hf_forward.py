"""Hugging Face's side of a benchmark, run in its own process (torch's and numpy's thread
pools slow each other down in one process): open a folder, run the forward pass with hidden
states and attentions returned (eager attention, float32 compute), print one JSON line.

    PYTHON_WITH_TORCH tests/bench/hf_forward.py --model DIR --tokens N [--repeat R] [--gemm JSON]

--gemm '{"products": [...], "n_layer": L}' (gemm_limit.pass_products) also times torch's
matrix products of the pass alone ("gemm_s") and a large square product ("peak_gflops").
"threads" is torch's intra-op thread count."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemm_limit  # noqa: E402
from memory import peak_rss_anon, rss_anon  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokens", type=int, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gemm", help="JSON: the pass's products and n_layer (see gemm_limit.py)")
    args = parser.parse_args()
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    torch.set_grad_enabled(False)
    base = rss_anon()
    start = time.perf_counter()
    config = AutoConfig.from_pretrained(args.model)
    cls = AutoModelForCausalLM if config.model_type in ("gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma") else AutoModel
    model = cls.from_pretrained(args.model, attn_implementation="eager", dtype=torch.float32).eval()
    opened = time.perf_counter() - start
    after_open = rss_anon() - base
    ids = torch.arange(args.tokens)[None] % 500 + 10
    model(input_ids=ids[:, :16], output_hidden_states=True, output_attentions=True)
    times = []
    with peak_rss_anon() as peak:
        for _ in range(args.repeat):
            start = time.perf_counter()
            model(input_ids=ids, output_hidden_states=True, output_attentions=True)
            times.append(time.perf_counter() - start)
    figures = {"open_s": opened, "rss_anon_after_open_mib": after_open / 2**20,
               "forward_s": statistics.median(times), "forward_best_s": min(times),
               "peak_rss_anon_mib": (peak() - base) / 2**20,
               "threads": torch.get_num_threads(), "torch": torch.__version__}
    if args.gemm:
        spec = json.loads(args.gemm)
        randn = lambda *shape: torch.randn(*shape, dtype=torch.float32)  # noqa: E731
        transpose = lambda a: a.transpose(-2, -1)  # noqa: E731
        figures["gemm_s"] = gemm_limit.gemm_seconds([tuple(p) for p in spec["products"]], spec["n_layer"],
                                                    randn, torch.matmul, transpose)
        figures["peak_gflops"] = gemm_limit.peak_gflops(randn, torch.matmul)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
