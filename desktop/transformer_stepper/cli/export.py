"""`transformer-stepper export --model PATH --text TEXT --out DIR [--format png|svg] [--layer L]
[--head H] [--scale S]`: every stage's plots rendered with no display into DIR.

DIR is created if its parent exists. Files already in DIR with the same names are replaced
(the line that reports them says so); nothing else in DIR is touched. Stages that do not apply
to the model (prediction without a language-model head) are skipped with a note on stderr.
Bad input raises ModelError (the CLI prints one `error:` line and exits 2). Qt is imported
only when the figures are drawn."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..core import stages
from ..core.errors import ModelError
from .console import check_scale, say, warn_non_finite


def add_parser(sub) -> None:
    parser = sub.add_parser("export", help="render every stage's plots to image files (no display)")
    parser.add_argument("--model")
    parser.add_argument("--text", required=True)
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--format", choices=("png", "svg"), default="png")
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--head", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.set_defaults(run=run_export)


def _check_arguments(args: argparse.Namespace) -> None:
    check_scale(args.scale)
    if args.format not in ("png", "svg"):
        raise ModelError(f"--format {args.format}: must be png or svg")


def _check_layer_head(args: argparse.Namespace, config) -> None:
    if not 0 <= args.layer < config.n_layer:
        raise ModelError(f"--layer {args.layer}: the model has {config.n_layer} layers "
                         f"(0–{config.n_layer - 1})")
    if not 0 <= args.head < config.n_head:
        raise ModelError(f"--head {args.head}: the model has {config.n_head} heads "
                         f"(0–{config.n_head - 1})")


def run_export(args: argparse.Namespace) -> int:
    from ..io.array_export import prepare_folder
    from ..io.loader import load_model

    _check_arguments(args)                   # everything cheap before the slow part
    folder = prepare_folder(Path(args.out))
    model = load_model(args.model)
    for warning in model.warnings:
        say(f"warning: {warning}", sys.stderr)
    _check_layer_head(args, model.config)
    trace = model.trace(args.text)
    if trace.truncated:
        say(f"warning: the text is longer than the model's context; truncated to "
            f"{model.config.n_ctx} tokens", sys.stderr)
    warn_non_finite(model, trace, drawn=True)

    start = time.perf_counter()
    from ..ui.offscreen import ensure_application

    ensure_application()
    from ..ui.export.job import ExportJob
    from ..ui.export.render import ExportOptions
    from ..ui.export.snapshot import SnapshotSession

    session = SnapshotSession(model, trace, layer=args.layer, head=args.head)
    options = ExportOptions(format=args.format, scale=float(args.scale))
    job = ExportJob(session, folder, [s.key for s in stages.STAGES], options)
    for note in job.notes:
        say(f"note: {note}", sys.stderr)
    job.fileWritten.connect(
        lambda path, replaced: say(f"wrote {path}" + (" (replaced the existing file)" if replaced else "")))
    try:
        written = job.run()
    finally:
        job.deleteLater()
        session.deleteLater()
    for problem in job.problems:
        say(f"warning: {problem}", sys.stderr)
    say(f"{len(written)} files in {folder} ({time.perf_counter() - start:.1f} s)")
    return 0
