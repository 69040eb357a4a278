"""`transformer-stepper compare --model PATH --word WORD --text "..." --text "..." [--text ...]
--out DIR [--format png|svg] [--layer L] [--head H] [--scale S]`: every Compare figure rendered
with no display into DIR (`compare-<n>-<plot>[-L<l>H<h>].<format>`, as the app's right-click
export names them), and compare.csv (see io/compare_csv.py). An encoder–decoder's sentences are
sources, compared through its encoder (core/analysis/seq2seq_compare.py).

A sentence without the word is left out with a warning naming it; fewer than two sentences
left, more than eight given, a layer or head out of range: one `error:` line (ModelError),
checked before anything is written. Qt is imported only when the figures are drawn."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..core.analysis.compare import MIN_SENTENCES, checked_texts
from ..core.model.errors import ModelError
from ..io.export_formats import DEFAULT_FIGURE_FORMAT, figure_format_names
from .console import check_scale, say


def add_parser(sub) -> None:
    parser = sub.add_parser("compare", help="the same word in 2-8 sentences: every Compare "
                                            "figure and compare.csv (no display)")
    parser.add_argument("--model", help="HF folder, .safetensors or .npz (default: built-in model)")
    parser.add_argument("--word", default="", help="the word compared (its first occurrence in each)")
    parser.add_argument("--text", action="append", required=True, help="a sentence; repeat, 2 to 8")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--format", choices=figure_format_names(), default=DEFAULT_FIGURE_FORMAT)
    parser.add_argument("--layer", type=int, default=None, help="attention plot's layer (default: last)")
    parser.add_argument("--head", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.set_defaults(run=run_compare)


def _check(args: argparse.Namespace) -> list[str]:
    check_scale(args.scale)
    if not args.word.strip():
        raise ModelError("--word: give the word to compare")
    texts = checked_texts(args.text)
    if len(texts) < MIN_SENTENCES:
        raise ModelError(f"{len(texts)} non-empty --text: compare needs at least {MIN_SENTENCES}")
    return texts


def run_compare(args: argparse.Namespace) -> int:
    from ..io.array_export import prepare_folder

    texts = _check(args)                      # everything cheap before the slow part
    folder = prepare_folder(Path(args.out))
    from ..core.analysis.compare import attention_rows, compare
    from ..io.compare_csv import write_compare_csv
    from ..io.loader import load_model

    model = load_model(args.model)
    for warning in model.warnings:
        say(f"warning: {warning}", sys.stderr)
    if getattr(model, "is_seq2seq", False):   # an encoder–decoder: the source side's encoder
        from ..core.analysis.seq2seq_compare import EncoderSide

        model = EncoderSide(model)
        say(f"note: {model.name}: the sentences are sources, compared through the encoder", sys.stderr)
    config = model.config
    layer = config.n_layer - 1 if args.layer is None else args.layer
    if not 0 <= layer < config.n_layer:
        raise ModelError(f"--layer {layer}: the model has {config.n_layer} layers (0–{config.n_layer - 1})")
    if not 0 <= args.head < config.n_head:
        raise ModelError(f"--head {args.head}: the model has {config.n_head} heads (0–{config.n_head - 1})")
    comparison = compare(model, texts, args.word)
    for problem in comparison.problems:
        say(f"warning: {problem}: left out", sys.stderr)
    for note in comparison.notes:
        say(f"note: {note}", sys.stderr)
    for sentence in comparison.sentences:
        if sentence.ok:
            piece = sentence.trace.tokens[sentence.position]
            say(f"S{sentence.number}: token {sentence.position} '{piece}' "
                 f"(id {int(sentence.trace.input_ids[sentence.position])}) of {sentence.text!r}")

    start = time.perf_counter()
    from ..ui.offscreen import ensure_application

    ensure_application()
    from ..core.analysis.labels import token_labels
    from ..ui.compare.bundle import CompareFigures
    from ..ui.compare.export import write_figures
    from ..ui.export.render import ExportOptions

    def report(path, replaced) -> None:
        say(f"wrote {path}" + (" (replaced the existing file)" if replaced else ""))

    figures = CompareFigures()
    try:
        labels = [token_labels(s.trace, model.tokenizer) if s.trace is not None else []
                  for s in comparison.sentences]
        figures.draw(comparison, attention_rows(comparison, layer), layer, args.head, labels)
        figures.set_layer(layer)
        options = ExportOptions(format=args.format, scale=float(args.scale))
        description = f"Transformer Stepper · {model.name} · compare '{args.word}'"
        written = write_figures(figures, folder, options, layer, args.head, description, report)
    finally:
        figures.close()
    path, replaced = write_compare_csv(folder, comparison)
    report(path, replaced)
    say(f"{len(written) + 1} files in {folder} ({time.perf_counter() - start:.1f} s)")
    return 0
