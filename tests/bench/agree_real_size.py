"""The app's next-token predictions against llama.cpp's on a real-size GGUF (the files of
tests/bench/make_real_size.py and quantize_real_size.py): every position's logits of the same
ids, the app in this process, llama.cpp in its own (io/llama_cpp_worker.py, the check's runner).

    python tests/bench/agree_real_size.py FILE.gguf [FILE.gguf ...] [--tokens 32]
        [--llama-preload SO]

Per file: the top-1 agreement over the positions, Pearson's r of the logits, the largest gap,
and at each position where the argmax differs, the app's margin between its top two logits
(llama.cpp rounds activations to 8 bits inside its quantized products, so near ties can flip).
--llama-preload: LD_PRELOAD of llama.cpp's process (see bench_real_size.py)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_big import cpu_name, encoded, token_ids  # noqa: E402
from bench_real_size import llama_overrides  # noqa: E402


def agreement(path: Path, n_tokens: int) -> dict:
    from transformer_stepper import load_model
    from transformer_stepper.core.analysis.reference_check import logits_agreement
    from transformer_stepper.io.hf_check import llama_cpp_logits
    from transformer_stepper.runtime import tune_process

    tune_process()
    model = load_model(path)
    ids = token_ids(model, n_tokens)
    start = time.perf_counter()
    theirs, why = llama_cpp_logits(path, ids, threads=2, overrides=llama_overrides(path))
    llama_s = time.perf_counter() - start
    if theirs is None:
        return {"file": path.name, "error": why}
    start = time.perf_counter()
    ours = model.trace_encoded(encoded(ids), detail_layers=()).logits
    app_s = time.perf_counter() - start
    agree = logits_agreement(ours, theirs)
    top2 = np.sort(ours, axis=1)[:, -2:]
    differ = np.flatnonzero(ours.argmax(1) != theirs.argmax(1))
    return {"file": path.name, "tokens": len(ids), "top1": agree.top1_agree, "r": agree.correlation,
            "max_abs": agree.max_abs, "logit_std": float(ours.std()),
            "differ_at": [int(t) for t in differ],
            "app_margins_there": [float(top2[t, 1] - top2[t, 0]) for t in differ],
            "median_app_margin": float(np.median(top2[:, 1] - top2[:, 0])),
            "app_s": app_s, "llama_cpp_s": llama_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--llama-preload", type=Path)
    args = parser.parse_args()
    if args.llama_preload:                  # the children only: this process is already loaded
        os.environ["LD_PRELOAD"] = str(args.llama_preload)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    for path in args.files:
        out = agreement(path, args.tokens)
        if "error" in out:
            print(f"{out['file']}: {out['error']}")
            continue
        print(f"{out['file']}: {out['tokens']} positions, top-1 agreement {100 * out['top1']:.1f} %, "
              f"r {out['r']:.6f}, largest gap {out['max_abs']:.3g} (logits' std {out['logit_std']:.3g}); "
              f"differ at {out['differ_at']} where the app's top-2 margin is "
              f"{[round(m, 4) for m in out['app_margins_there']]} (median margin "
              f"{out['median_app_margin']:.4f}); app {out['app_s']:.1f} s, llama.cpp "
              f"{out['llama_cpp_s']:.1f} s; load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
