"""The model diff's cost (core/analysis/model_diff.py): two random Llama-shaped models (d_model 768,
12 layers, 12 query heads over 4 K/V heads, d_ff 2048: GPT-2-small-sized) on the same text,
trace B and compare every stage of every layer, at a few lengths. Prints wall-clock seconds
of B's pass and of the comparison, and the process's peak resident memory.

    python tests/bench/bench_model_diff.py [N_TOKENS ...]      (default 128 512)"""
from __future__ import annotations

import resource
from dataclasses import replace
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.builders import random_params, tiny_config, tokenizer_for, wrap  # noqa: E402
from transformer_stepper.core.analysis import model_diff  # noqa: E402
from transformer_stepper.core.trace.model import Model  # noqa: E402

SHAPE = dict(d_model=768, n_head=12, n_kv_head=4, n_layer=12, d_ff=2048, n_ctx=4096)
WORDS = "the river bank flooded after heavy rain while the bank downtown lent money to the city".split()


def main(argv: list[str]) -> int:
    lengths = [int(a) for a in argv] or [128, 512]
    config = tiny_config("llama", **SHAPE)
    tokenizer = wrap(tokenizer_for("llama"))
    model_a = Model(config, random_params(config, 1), tokenizer, source="A")
    model_b = Model(config, random_params(config, 2), tokenizer, source="B")
    for n in lengths:
        text = " ".join(WORDS[i % len(WORDS)] for i in range(n))
        encoded = model_a.encode(text)
        encoded = replace(encoded, **{f: getattr(encoded, f)[:n] for f in
                                      ("tokens", "input_ids", "token_type_ids", "offsets", "special_tokens_mask")})
        trace_a = model_a.trace_encoded(encoded, text)
        start = time.perf_counter()
        trace_b = model_b.trace_encoded(encoded, text)
        traced = time.perf_counter() - start
        start = time.perf_counter()
        model_diff.diff_traces(trace_a, trace_b)
        compared = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{trace_a.n_seq:5d} tokens: B's pass {traced:.2f} s, every stage of every layer compared "
              f"{compared:.2f} s, peak RSS {peak:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
