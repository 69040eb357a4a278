"""Editing a long text: time from the edited text to the shown layer's detail ready (what the
app's worker does: Model.retrace with the trace on screen as `previous` and the shown layer as
detail_layers), for a word typed at the end, a word changed in the middle and the last word
deleted; then another layer's detail on demand. Wall and CPU seconds (the process's, every
thread: on a machine shared with other work the CPU time moves less). Runs on any checkout
(only public calls), so the code before and after a change can be compared, each in its own
process:

    PYTHONPATH=/path/to/other/desktop python tests/bench/bench_edit.py MODEL_DIR [--tokens 1000]
                                                  [--layer 5] [--repeats 5] [--threads 1]

Make the model with tests/bench/make_big_models.py (gpt2_small_shaped)."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_big import cpu_name  # noqa: E402

import transformer_stepper  # noqa: E402
from transformer_stepper import load_model  # noqa: E402
from transformer_stepper.core.model.blas import blas_threads  # noqa: E402
from transformer_stepper.runtime import tune_process  # noqa: E402

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


def timed(call) -> tuple[float, float, object]:
    """-> (wall s, CPU s, result)"""
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def ms(values) -> str:
    return f"{1000 * statistics.median(values):6.0f} ({1000 * min(values):.0f}–{1000 * max(values):.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--layer", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (the app: 2 from 256 tokens)")
    args = parser.parse_args()
    tune_process()
    with blas_threads(args.threads):
        run(args)
    return 0


def run(args) -> None:
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, {args.threads} BLAS thread(s), load "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}; code: {Path(transformer_stepper.__file__).parent}")
    model = load_model(args.model)
    layer = min(args.layer, model.config.n_layer - 1)
    text = text_of(model, args.tokens)
    words = text.split()
    middle = len(words) // 2
    edits = {"type a word at the end": text + " river",
             "change a word in the middle": " ".join(words[:middle] + ["river"] + words[middle + 1:]),
             "delete the last word": " ".join(words[:-1])}
    wall, cpu, trace = timed(lambda: model.retrace(None, model.encode(text), text, detail_layers=(layer,)))
    print(f"{trace.n_seq} tokens, layer {layer} shown; first trace {wall:.2f} s wall, {cpu:.2f} s CPU")
    print("ms, median (min–max)              to layer's detail: wall       CPU        "
          "another layer then: wall   CPU")
    for name, edited in edits.items():
        walls, cpus, other_walls, other_cpus, rows = [], [], [], [], 0
        for _ in range(args.repeats):
            wall, cpu, edited_trace = timed(lambda: model.retrace(trace, model.encode(edited), edited,
                                                                  detail_layers=(layer,)))
            walls.append(wall)
            cpus.append(cpu)
            rows = edited_trace.computed_rows
            other = (layer + 2) % model.config.n_layer                 # a layer not on screen
            wall, cpu, _ = timed(partial(edited_trace.prepare, other))
            other_walls.append(wall)
            other_cpus.append(cpu)
            edited_trace = None                        # freed before the next edit
        print(f"{name:<28} ({rows:>3} rows computed) {ms(walls):>18} {ms(cpus):>18} "
              f"{ms(other_walls):>18} {ms(other_cpus):>18}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
