"""Dequantization speed of each block type, gguf-py's numpy kernels beside core/model/quant_types'
plain numpy path (the readable reference the panel and provenance use), on one packed matrix:

    python tests/bench/bench_dequantize_types.py [--rows 2048] [--cols 4096] [--rounds 3]

Prints, per type, the median of the rounds in G weights/s (float32 written) and checks the two
agree bit for bit. Packing uses the project's packers (tests/gguf_packers.py)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gguf_packers import pack  # noqa: E402

TYPES = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q3_K", "Q2_K", "IQ4_XS", "IQ4_NL", "MXFP4")


def median_seconds(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    import gguf
    from transformer_stepper.core.model.quant_types import quant_type

    w = (np.random.default_rng(0).standard_normal((args.rows, args.cols)) * 0.02).astype(np.float32)
    n = w.size
    print(f"{args.rows} x {args.cols} = {n / 1e6:.1f} M weights, median of {args.rounds} rounds, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'type':8} {'bytes/weight':>12} {'gguf-py G w/s':>14} {'quant_types G w/s':>18}  equal")
    for name in TYPES:
        qtype = gguf.GGMLQuantizationType[name]
        packed = gguf.quants.quantize(w, qtype) if name in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1") \
            else pack(w, name)
        reference = gguf.quants.dequantize(packed, qtype)
        mine = quant_type(name).dequantize(packed)
        equal = np.array_equal(reference.view(np.uint32), mine.view(np.uint32))
        t_gguf = median_seconds(lambda: gguf.quants.dequantize(packed, qtype), args.rounds)
        t_mine = median_seconds(lambda: quant_type(name).dequantize(packed), args.rounds)
        print(f"{name:8} {packed.nbytes / n:12.4f} {n / t_gguf / 1e9:14.3f} {n / t_mine / 1e9:18.3f}  {equal}")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
