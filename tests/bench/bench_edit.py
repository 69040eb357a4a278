"""Editing a long text: time from the edited text to the shown layer's detail ready (the app's
worker function, state.jobs.compute_trace, with the trace on screen as `previous`), for a word
typed at the end, a word changed in the middle and the last word deleted; then another layer's
detail on demand. Runs on any checkout (only public calls), so the code before and after a
change can be compared, each in its own process:

    PYTHONPATH=/path/to/other/desktop python tests/bench/bench_edit.py MODEL_DIR [--tokens 1000]
                                                                       [--layer 5] [--repeats 5]

Make the model with tests/bench/make_big_models.py (gpt2_small_shaped)."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_big import cpu_name  # noqa: E402

import transformer_stepper  # noqa: E402
from transformer_stepper import load_model  # noqa: E402
from transformer_stepper.runtime import tune_process  # noqa: E402
from transformer_stepper.state.jobs import compute_trace  # noqa: E402

WORDS = ("the bank of the river was steep and green and she went to the bank to deposit "
         "money while he walked along the water until the sun set behind the hills").split()


def text_of(model, n_tokens: int) -> str:
    """A text of about n_tokens tokens (whole words, at most n_tokens)."""
    words = [WORDS[i % len(WORDS)] for i in range(n_tokens)]
    low, high = 1, len(words)
    while low < high:                              # the most words that fit
        middle = (low + high + 1) // 2
        if len(model.encode(" ".join(words[:middle])).input_ids) <= n_tokens:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low])


def timed(model, text: str, layer: int, previous) -> tuple[float, object]:
    start = time.perf_counter()
    result = compute_trace(model, text, layer, previous)
    return time.perf_counter() - start, result.trace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--layer", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tune_process()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; code: {Path(transformer_stepper.__file__).parent}")
    model = load_model(args.model)
    layer = min(args.layer, model.config.n_layer - 1)
    text = text_of(model, args.tokens)
    words = text.split()
    middle = len(words) // 2
    edits = {"type a word at the end": text + " river",
             "change a word in the middle": " ".join(words[:middle] + ["river"] + words[middle + 1:]),
             "delete the last word": " ".join(words[:-1])}
    took, trace = timed(model, text, layer, None)
    print(f"{trace.n_seq} tokens, layer {layer} shown; first trace {took:.2f} s")
    for name, edited in edits.items():
        seconds, rows, other = [], 0, []
        for _ in range(args.repeats):
            took, edited_trace = timed(model, edited, layer, trace)
            seconds.append(took)
            rows = edited_trace.computed_rows
            start = time.perf_counter()
            edited_trace.prepare((layer + 2) % model.config.n_layer)    # a layer not on screen
            other.append(time.perf_counter() - start)
            del edited_trace
        print(f"{name:<28} -> layer {layer}'s detail: median {1000 * statistics.median(seconds):6.0f} ms "
              f"(min {1000 * min(seconds):.0f}, max {1000 * max(seconds):.0f}; {rows} positions computed); "
              f"then another layer on demand: median {1000 * statistics.median(other):.0f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
