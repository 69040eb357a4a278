"""A forward pass in a worker thread while the main thread runs Python (as the GUI thread does
when it paints and handles events), against the same pass alone, for several GIL switch
intervals: why runtime.py sets 0.2 ms for the app.

    python tests/bench/bench_gil.py [MINILM_DIR]"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import DEFAULT, text_of  # noqa: E402

from transformer_stepper import load_model  # noqa: E402
from transformer_stepper.core.model.blas import set_blas_threads  # noqa: E402


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TS_MINILM_DIR", DEFAULT))
    set_blas_threads(1)             # as the app runs
    model = load_model(folder)
    text = text_of(model, 512)
    model.trace(text)

    def standalone() -> float:
        start = time.perf_counter()
        model.trace(text, detail_layers=(0,))
        return time.perf_counter() - start

    def in_worker() -> float:
        out: list[float] = []
        worker = threading.Thread(target=lambda: out.append(standalone()))
        worker.start()
        while worker.is_alive():    # the main thread busy in Python
            total = 0
            for i in range(2000):
                total += i
        worker.join()
        return out[0]

    for interval in (0.005, 0.0005, 0.0002):
        sys.setswitchinterval(interval)
        alone = min(standalone() for _ in range(3))
        busy = min(in_worker() for _ in range(3))
        print(f"switch interval {interval * 1000:.1f} ms: standalone {alone * 1000:.0f} ms, in a worker "
              f"while the main thread runs Python {busy * 1000:.0f} ms, ratio {busy / alone:.2f}")


if __name__ == "__main__":
    main()
