"""The window's longest stall while every layer is exported (File → Export with "every layer
and head"): before, each layer's detail was computed on the GUI thread; now in a worker.

    python tests/bench/bench_export_stall.py MODEL_DIR [--tokens 512] [--stages feed_forward]

The trace's detail cache is emptied first, so every layer is computed during the export (as
when the layers were evicted, or never recorded). A 2 ms timer (ui/stall_meter.py) notes the
longest gap in the event loop; its label is the file being drawn then. Run it once with each
side's desktop/ first on PYTHONPATH, in separate processes, alternating."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_big import cpu_name  # noqa: E402
from bench_ui import text_of  # noqa: E402

from transformer_stepper.io.loader import load_model  # noqa: E402
from transformer_stepper.ui.export.job import ExportJob  # noqa: E402
from transformer_stepper.ui.export.render import ExportOptions  # noqa: E402
from transformer_stepper.ui.export.snapshot import SnapshotSession  # noqa: E402
from transformer_stepper.ui.offscreen import ensure_application  # noqa: E402
from transformer_stepper.ui.stall_meter import StallMeter  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--stages", default="feed_forward")
    args = parser.parse_args()
    ensure_application()
    model = load_model(args.model)
    trace = model.trace(text_of(model, args.tokens))
    trace.cache.clear()
    snapshot = SnapshotSession(model, trace, layer=0, head=0)
    meter = StallMeter()
    with tempfile.TemporaryDirectory() as folder:
        job = ExportJob(snapshot, Path(folder), args.stages.split(","), ExportOptions("png", 1),
                        all_layers_heads=True)
        job.progressed.connect(lambda _done, _total, name: setattr(meter, "label", name))
        start = time.perf_counter()
        meter.start()
        job.run()
        longest = meter.stop()
        seconds = time.perf_counter() - start
    label, _ = meter.worst()
    print(f"{cpu_name()}; {model.name}, {trace.n_seq} tokens, {model.config.n_layer} layers; "
          f"stages {args.stages}: {len(job.written)} files in {seconds:.1f} s; "
          f"longest stall {longest * 1000:.0f} ms (at {label or 'start'}); "
          f"layers computed {trace.cache.computed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
