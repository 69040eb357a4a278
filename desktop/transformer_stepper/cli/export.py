"""`transformer-stepper export --model PATH --text TEXT --out DIR [--format png|svg] [--layer L]
[--head H] [--scale S] [--stages 4,7] [--figure NAME]`: every stage's plots (or the stages and
figures named) rendered with no display into DIR.

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

from ..core.model import stages
from ..core.model.errors import ModelError
from ..io.export_formats import DEFAULT_FIGURE_FORMAT, check_figure_format, figure_format_names
from . import seq2seq
from .console import check_scale, say, warn_non_finite


def add_parser(sub) -> None:
    parser = sub.add_parser("export", help="render every stage's plots to image files (no display)")
    parser.add_argument("--model", help="HF folder, .safetensors, .gguf or .npz (default: built-in model)")
    parser.add_argument("--text", help="the sentence whose pass is drawn")
    parser.add_argument("--session", help="a .stepper session file: its model, text (and generated "
                                          "tokens), layer, head, selection, temperature and shown pass")
    seq2seq.add_arguments(parser)
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--format", choices=figure_format_names(), default=DEFAULT_FIGURE_FORMAT,
                        help=f"image format (default {DEFAULT_FIGURE_FORMAT})")
    parser.add_argument("--layer", type=int, default=0, help="the layer of the per-layer stages (default 0)")
    parser.add_argument("--head", type=int, default=0, help="the head of the per-head stages (default 0)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="PNG pixels per screen pixel, 0.1-16 (default 1; 2 for print)")
    parser.add_argument("--stages", help="only these stages, by number or key: e.g. 4,7 or "
                                         "position_addition,softmax (default: every stage)")
    parser.add_argument("--figure", action="append", metavar="NAME",
                        help="only the figure(s) of this name, e.g. attention_weights (repeatable; the "
                             "file names show each figure's name: 07-softmax-attention_weights-L0H0.png)")
    parser.set_defaults(run=run_export)


def _check_arguments(args: argparse.Namespace) -> None:
    check_scale(args.scale)
    if args.session is None:
        seq2seq.check_text(args)
    elif args.text is not None or args.source is not None:
        raise ModelError("--session names its text; leave out --text and --source")
    if args.session is not None and args.model is not None:
        raise ModelError("--session names its model; leave out --model")
    check_figure_format(args.format)


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
    view: dict = {}
    if args.session is not None:
        model, trace, view = _from_session(Path(args.session))
        args.layer, args.head = view["layer"], view["head"]
    else:
        model = load_model(args.model)
        for warning in model.warnings:
            say(f"warning: {warning}", sys.stderr)
        if seq2seq.is_seq2seq(model):
            return _export_seq2seq(args, model, folder)
        args.text = seq2seq.text_for(args, model)
        _check_layer_head(args, model.config)
        trace = model.trace(args.text)
    if trace.truncated:
        say(f"warning: the text is longer than the model's context; truncated to "
            f"{model.config.n_ctx} tokens", sys.stderr)
    warn_non_finite(model, trace, drawn=True)
    _render(args, model, trace, folder, chosen_stages(args.stages), view.get("snapshot", {}))
    return 0


def chosen_stages(text) -> list[str]:
    """--stages "4,7" or "position_addition,softmax" -> stage keys in stepping order."""
    if not text:
        return [s.key for s in stages.STAGES]
    by_number = {str(s.number): s.key for s in stages.STAGES}
    keys = {s.key for s in stages.STAGES}
    chosen = set()
    for part in (p.strip() for p in str(text).split(",")):
        key = by_number.get(part, part)
        if key not in keys:
            raise ModelError(f"--stages {text}: no stage '{part}' (stages 1-{len(stages.STAGES)} or "
                             f"{', '.join(s.key for s in stages.STAGES)})")
        chosen.add(key)
    return [s.key for s in stages.STAGES if s.key in chosen]


def _export_seq2seq(args: argparse.Namespace, model, folder: Path) -> int:
    """The encoder's stages over the source into DIR/encoder, the decoder's (self-attention
    stages; cross-attention arrays are in `trace --source`) into DIR/decoder; with --ablate /
    --no-source-positions, the intervened pass's."""
    trace = seq2seq.seq2seq_trace(args, model, seq2seq.interventions_of(args))
    encoder_model, decoder_model = model.stack_models()
    keys = [s.key for s in stages.STAGES]
    for name, stack_model, stack_trace, stack_keys in (
            ("encoder", encoder_model, trace.encoder, keys),
            ("decoder", decoder_model, trace.decoder, [k for k in keys if k != "logit_lens"])):
        _check_layer_head(args, stack_model.config)
        if name == "decoder":
            say("note: skipped 13-logit_lens of the decoder: the lens does not apply this model's "
                "head scaling and final_logits_bias", sys.stderr)
        sub = folder / name
        sub.mkdir(exist_ok=True)
        _render(args, stack_model, stack_trace, sub, stack_keys)
    return 0


def _render(args: argparse.Namespace, model, trace, folder: Path, stage_keys, snapshot=None) -> list:
    start = time.perf_counter()
    from ..ui.offscreen import ensure_application

    ensure_application()
    from ..ui.export.job import ExportJob
    from ..ui.export.render import ExportOptions
    from ..ui.export.snapshot import SnapshotSession

    session = SnapshotSession(model, trace, layer=args.layer, head=args.head, **(snapshot or {}))
    options = ExportOptions(format=args.format, scale=float(args.scale))
    job = ExportJob(session, folder, stage_keys, options)
    job.only_figures = frozenset(args.figure) if getattr(args, "figure", None) else None
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
    if job.only_figures and not written:
        raise ModelError(f"--figure {', '.join(sorted(job.only_figures))}: no figure of that name in the "
                         f"stages exported; their figures: {', '.join(job.figure_names)}")
    say(f"{len(written)} files in {folder} ({time.perf_counter() - start:.1f} s)")
    return written


def _from_session(path: Path):
    """The session file's model (its fingerprint checked), trace and view."""
    from ..io.loader import load_model
    from ..io.session_file import model_fingerprint, read_session

    data = read_session(path)
    if data.model_path is not None and not Path(data.model_path).exists():
        raise ModelError(f"{path}: the model {data.model_path} is not there")
    if model_fingerprint(data.model_path) != data.fingerprint:
        raise ModelError(f"{path}: the model at {data.model_path or 'the built-in model'} is not the one "
                         "saved (its fingerprint differs: the weights changed)")
    model = load_model(data.model_path)
    config = model.config
    if data.layer >= config.n_layer or data.head >= config.n_head:
        raise ModelError(f"{path}: layer {data.layer} / head {data.head} is outside the model")
    trace = model.trace(data.text)
    if data.generated_ids:
        trace = model.extend(trace, data.generated_ids)
    if data.selected >= trace.n_seq:
        raise ModelError(f"{path}: view.selected {data.selected} is outside the text's {trace.n_seq} tokens")
    if data.interventions and data.show_intervened:
        trace = model.intervene(trace, data.interventions)
    elif data.interventions:
        say("note: the session has interventions but showed the clean pass: the clean pass is rendered",
            sys.stderr)
    return model, trace, {"layer": data.layer, "head": data.head,
                          "snapshot": {"selected": data.selected, "temperature": data.temperature}}
