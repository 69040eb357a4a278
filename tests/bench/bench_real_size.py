"""An 8B-shaped GGUF (random weights, written by tests/bench/make_real_size.py with the project's
own packers, or by llama.cpp's quantizer: tests/bench/quantize_real_size.py) opened by the app's
library, and by llama.cpp when llama-cpp-python is installed, each run in its own process, the
sides alternated over rounds (the machine is shared: ranges), on the same token ids.

    python tests/bench/make_real_size.py /work/bench_models [--scheme Q4_K_M Q8_0 ...]
    python tests/bench/bench_real_size.py /work/bench_models/llama8b_q4_k_m.gguf [--rounds 3]
        [--tokens 32 128] [--layer 15] [--sides app llama.cpp] [--llama-preload SO]

Per run (one text length): open; the first view (the pass over every token with one layer's
detail, and the next-token predictions of the last position); one token typed at the end (the
retrace computes only the new position; predictions again); the token in the middle changed
(the retrace computes from there on); the first token changed (everything again); the peak
anonymous memory (RssAnon: not the file's pages) over the run. llama.cpp's side (2 threads,
the same ids and the same edits): load, a pass over the ids (logits of the last position), one
more id after them (its KV cache kept: a keystroke), the ids from the middle on (the cache cut
there), all of them again after the first one changed (the cache emptied). The summary gives
each side's medians and the ratio app / llama.cpp of the medians. Goals (the project's real-size
goals): open <= 2 s; first view <= 2x llama.cpp's pass; a token typed <= 2 s; an edit <= 2x
llama.cpp's pass over the changed positions; peak RssAnon <= 10 GB.

--llama-preload puts a shared object in LD_PRELOAD of llama.cpp's process only (on some Xeon
VMs ggml's AMX matrix path crashes; a shim that refuses AMX's arch_prctl makes ggml skip it)."""
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

from bench_big import cpu_name, encoded, token_ids  # noqa: E402
from memory import peak_rss_anon, rss_anon  # noqa: E402

GB = 1e9


def edited(ids, n_tokens: int, position: int) -> list[int]:
    """The first n_tokens ids with the one at `position` changed (to the next id of the text)."""
    out = [int(i) for i in ids[:n_tokens]]
    following = int(ids[position + 1])
    out[position] = following if following != out[position] else out[position] + 1
    return out


def app_side(path: Path, n_tokens: int, layer: int) -> dict:
    import numpy as np
    from transformer_stepper import load_model
    from transformer_stepper.core.model import quantized
    from transformer_stepper.runtime import tune_process

    tune_process()
    base = rss_anon()
    out = {}
    with peak_rss_anon() as peak:
        start = time.perf_counter()
        quantized.kernels()                  # numba's import and the cached kernels' load
        out["kernels_s"] = time.perf_counter() - start
        start = time.perf_counter()
        model = load_model(path)
        out["open_s"] = time.perf_counter() - start
        ids = token_ids(model, n_tokens + 1)     # one sentence repeated as often as needed
        if len(ids) < n_tokens + 1:
            raise SystemExit(f"the bench's text gives {len(ids)} tokens, not {n_tokens + 1}")

        def view(name, previous, these):
            # wall time, and the CPU time of the whole process (both cores): on a shared machine
            # the wall time depends on the load; CPU / cores is what a quiet machine would take
            start, cpu = time.perf_counter(), time.process_time()
            trace = model.retrace(previous, encoded(these), detail_layers=(layer,))
            trace.logits_at(-1)
            out[name + "_s"] = time.perf_counter() - start
            out[name + "_cpu_s"] = time.process_time() - cpu
            return trace

        trace = view("first_view", None, ids[:n_tokens])
        view("typed", trace, ids[:n_tokens + 1])
        view("edit", trace, np.asarray(edited(ids, n_tokens, n_tokens // 2), dtype=ids.dtype))
        view("edit_first", trace, np.asarray(edited(ids, n_tokens, 0), dtype=ids.dtype))
    out["peak_rss_gb"] = (peak() - base) / GB
    out["n_tokens"], out["ids"] = n_tokens, [int(i) for i in np.asarray(ids)]
    return out


def llama_side(path: Path, ids: list[int], n_tokens: int) -> dict:
    from llama_cpp import Llama

    out = {}
    base = rss_anon()
    with peak_rss_anon() as peak:
        start = time.perf_counter()
        llm = Llama(str(path), n_ctx=max(512, n_tokens + 8), n_threads=2, n_batch=512, verbose=False,
                    kv_overrides=llama_overrides(path))
        out["open_s"] = time.perf_counter() - start

        def timed(name, these):                       # wall time and the process's CPU time
            start, cpu = time.perf_counter(), time.process_time()
            llm.eval(these)
            out[name + "_s"] = time.perf_counter() - start
            out[name + "_cpu_s"] = time.process_time() - cpu

        timed("first_view", ids[:n_tokens])
        timed("typed", ids[n_tokens:n_tokens + 1])
        for name, position in (("edit", n_tokens // 2), ("edit_first", 0)):
            _cut_cache(llm, position)                 # the cache kept up to the edit
            timed(name, edited(ids, n_tokens, position)[position:])
    out["peak_rss_gb"] = (peak() - base) / GB
    return out


def llama_overrides(path: Path) -> dict | None:
    """Files written before make_real_size named the split "gpt-2" say "gpt2", which llama.cpp
    refuses ("unknown pre-tokenizer type"): it is told the name it knows (the ids are given, so
    llama.cpp's tokenizer is not used)."""
    import gguf

    field = gguf.GGUFReader(str(path)).fields.get("tokenizer.ggml.pre")
    if field is not None and bytes(field.parts[field.data[0]]).decode() == "gpt2":
        return {"tokenizer.ggml.pre": "gpt-2"}
    return None


def _cut_cache(llm, position: int) -> None:
    """llama.cpp's KV cache kept for the positions before `position` only."""
    llm.n_tokens = position
    ctx = llm._ctx
    if hasattr(ctx, "memory_seq_rm"):
        ctx.memory_seq_rm(-1, position, -1)
    else:                                             # llama-cpp-python before its memory API
        ctx.kv_cache_seq_rm(-1, position, -1)


def _have_llama_cpp() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


def _ids_of(path: Path, n_tokens: int) -> list[int]:
    """The app's ids of the bench's text (its tokenizer only: no pass)."""
    from transformer_stepper import load_model

    return [int(i) for i in token_ids(load_model(path), n_tokens + 1)]


def _run(args, side: str, n_tokens: int, ids=None) -> dict:
    command = [sys.executable, __file__, str(args.model), "--side", side, "--tokens", str(n_tokens),
               "--layer", str(args.layer)]
    if ids is not None:
        command += ["--ids", json.dumps(ids)]
    env = dict(os.environ)
    if side == "llama.cpp" and args.llama_preload:
        env["LD_PRELOAD"] = str(args.llama_preload)
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    if run.returncode != 0:
        raise SystemExit(f"{side} failed: {run.stderr.strip().splitlines()[-3:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _range(values: list[float]) -> str:
    values = sorted(values)
    median = values[len(values) // 2]
    return f"{median:.2f}" + (f" ({values[0]:.2f}–{values[-1]:.2f})" if len(values) > 1 else "")


KEYS = (("open s", "open_s"), ("first view s", "first_view_s"), ("  its CPU s (both cores)", "first_view_cpu_s"),
        ("one token typed at the end s", "typed_s"), ("  its CPU s", "typed_cpu_s"),
        ("the middle token changed s", "edit_s"), ("  its CPU s", "edit_cpu_s"),
        ("the first token changed s", "edit_first_s"), ("  its CPU s", "edit_first_cpu_s"),
        ("peak RssAnon GB", "peak_rss_gb"))


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--sides", nargs="+", choices=("app", "llama.cpp"), default=["app", "llama.cpp"])
    parser.add_argument("--llama-preload", type=Path, help="LD_PRELOAD of llama.cpp's process")
    parser.add_argument("--side", choices=("app", "llama.cpp"), help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side == "app":
        print(json.dumps(app_side(args.model, args.tokens[0], args.layer)))
        return 0
    if args.side == "llama.cpp":
        print(json.dumps(llama_side(args.model, json.loads(args.ids), args.tokens[0])))
        return 0
    sides = [side for side in args.sides if side != "llama.cpp" or _have_llama_cpp()]
    print(f"{args.model.name} ({args.model.stat().st_size / GB:.2f} GB); CPU: {cpu_name()}, "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at start; sides: {sides}")
    results = {(side, n): [] for side in sides for n in args.tokens}
    ids_for: dict[int, list[int]] = {}
    for round_number in range(args.rounds):
        for n_tokens in args.tokens:
            order = sides if round_number % 2 == 0 else sides[::-1]
            ids = ids_for.get(n_tokens)
            for side in order:
                if side == "llama.cpp" and ids is None:     # llama.cpp first: the ids of the text
                    ids = _ids_of(args.model, n_tokens)
                result = _run(args, side, n_tokens, ids if side == "llama.cpp" else None)
                if side == "app":
                    ids = result["ids"]
                ids_for[n_tokens] = ids
                result.pop("ids", None)
                results[(side, n_tokens)].append(result)
                print(f"round {round_number + 1}, {n_tokens} tokens, {side}: "
                      + ", ".join(f"{k} {v:.2f}" for k, v in result.items() if isinstance(v, float))
                      + f"; load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\nmedians of {args.rounds} rounds (range)")
    for n_tokens in args.tokens:
        print(f"{n_tokens} tokens" + "".join(f" | {side:>22}" for side in sides))
        for label, key in KEYS:
            print(f"  {label:30}" + "".join(f" | {_range([r.get(key, float('nan')) for r in results[(side, n_tokens)]]):>22}"
                                            for side in sides))
    if len(sides) == 2:
        print("\nratio app / llama.cpp of the medians")
        for n_tokens in args.tokens:
            for label, key in KEYS:
                app = [r[key] for r in results[("app", n_tokens)] if key in r]
                llama = [r[key] for r in results[("llama.cpp", n_tokens)] if key in r]
                if app and llama:
                    print(f"  {n_tokens} tokens, {label:30} {_median(app) / _median(llama):8.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
