"""`transformer-stepper export --model PATH --text TEXT --out DIR [--format png|svg] [--layer L]
[--head H] [--scale S]`: every stage's plots rendered with no display into DIR.

DIR is created if its parent exists. Files already in DIR with the same names are replaced
(the line that reports them says so); nothing else in DIR is touched. Stages that do not apply
to the model (prediction without a language-model head) are skipped with a note on stderr.
Bad input raises ModelError (the CLI prints one `error:` line and exits 2)."""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

from ..core import stages
from ..core.errors import ModelError
from ..io.array_export import prepare_folder

MIN_SCALE, MAX_SCALE = 0.25, 8.0


def ensure_application():
    """The QApplication, created if there is none. On Linux it uses the offscreen platform
    unless QT_QPA_PLATFORM says otherwise: nothing is shown, no display is needed, and the
    output does not depend on the screen's DPI."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        if sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        app = QApplication([sys.argv[0] if sys.argv else "transformer-stepper"])
    from .plots import configure_pyqtgraph

    configure_pyqtgraph()
    return app


def _check_arguments(args: argparse.Namespace) -> None:
    scale = args.scale
    if not math.isfinite(scale) or not MIN_SCALE <= scale <= MAX_SCALE:
        raise ModelError(f"--scale {scale:g}: must be between {MIN_SCALE:g} and {MAX_SCALE:g}")
    if args.format not in ("png", "svg"):
        raise ModelError(f"--format {args.format}: must be png or svg")


def _check_layer_head(args: argparse.Namespace, config) -> None:
    if not 0 <= args.layer < config.n_layer:
        raise ModelError(f"--layer {args.layer}: the model has {config.n_layer} layers "
                         f"(0–{config.n_layer - 1})")
    if not 0 <= args.head < config.n_head:
        raise ModelError(f"--head {args.head}: the model has {config.n_head} heads "
                         f"(0–{config.n_head - 1})")


def run_export(args: argparse.Namespace, say) -> int:
    """`say(text, stream)` prints (the command line's printer, which survives undecodable
    paths): passed in, so this module does not import the command line."""
    _say = say
    _check_arguments(args)                   # everything cheap before the slow part
    folder = prepare_folder(Path(args.out))
    from ..io.loader import load_model

    model = load_model(args.model)
    for warning in model.warnings:
        _say(f"warning: {warning}", sys.stderr)
    _check_layer_head(args, model.config)
    trace = model.trace(args.text)
    if trace.truncated:
        _say(f"warning: the text is longer than the model's context; truncated to "
             f"{model.config.n_ctx} tokens", sys.stderr)

    start = time.perf_counter()
    ensure_application()
    from .export.job import ExportJob
    from .export.render import ExportOptions
    from .export.snapshot import SnapshotSession

    session = SnapshotSession(model, trace, layer=args.layer, head=args.head)
    options = ExportOptions(format=args.format, scale=float(args.scale))
    job = ExportJob(session, folder, [s.key for s in stages.STAGES], options)
    for note in job.notes:
        _say(f"note: {note}", sys.stderr)
    job.fileWritten.connect(
        lambda path, replaced: _say(f"wrote {path}" + (" (replaced the existing file)" if replaced else "")))
    try:
        written = job.run()
    finally:
        session.shutdown()
        job.deleteLater()
        session.deleteLater()
    _say(f"{len(written)} files in {folder} ({time.perf_counter() - start:.1f} s)")
    return 0
