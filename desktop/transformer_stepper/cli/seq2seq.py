"""What `trace`, `export` and `generate` share for encoder–decoder models: --source (the text the
encoder reads once), --target (the target so far, for teacher forcing), and the interventions
--ablate STACK:LAYER:HEAD (encoder, decoder or cross; repeatable) and --no-source-positions."""
from __future__ import annotations

import argparse
import sys

from ..core.model.errors import ModelError
from .console import say


def add_arguments(parser) -> None:
    parser.add_argument("--source", help="encoder–decoder models: the source text (what --text is for other models)")
    parser.add_argument("--target", default="", help="encoder–decoder models: the target so far (teacher forcing)")
    parser.add_argument("--ablate", action="append", default=[], metavar="STACK:LAYER:HEAD",
                        help="encoder–decoder models: zero a head's output before its output projection; "
                             "STACK is encoder, decoder or cross (repeatable)")
    parser.add_argument("--no-source-positions", action="store_true",
                        help="encoder–decoder models: the encoder reads the source without positions")


def is_seq2seq(model) -> bool:
    return getattr(model, "is_seq2seq", False)


def check_text(args: argparse.Namespace) -> None:
    if args.text is None and args.source is None:
        raise ModelError("give the text: --text TEXT (or --source TEXT for an encoder–decoder)")


def text_for(args: argparse.Namespace, model) -> str:
    """The single text of a one-stack model; refuses --source/--target there."""
    if is_seq2seq(model):
        raise AssertionError("encoder–decoder models take source_for")
    if args.source is not None or args.target or getattr(args, "ablate", None) or \
            getattr(args, "no_source_positions", False):
        raise ModelError(f"{model.name}: --source/--target/--ablate/--no-source-positions are for "
                         f"encoder–decoder models; this is a {model.config.family} model: use --text")
    return args.text


def source_for(args: argparse.Namespace) -> str:
    if args.source is not None and args.text is not None:
        raise ModelError("give the source once: --source TEXT (--text is the same for an encoder–decoder)")
    return args.source if args.source is not None else args.text


def interventions_of(args: argparse.Namespace) -> tuple:
    from ..core.model.seq2seq_interventions import NoSourcePositions, parse

    items = tuple(parse(text) for text in getattr(args, "ablate", None) or ())
    return items + ((NoSourcePositions(),) if getattr(args, "no_source_positions", False) else ())


def seq2seq_trace(args: argparse.Namespace, model, interventions: tuple = ()):
    """The encoder over --source, the decoder over its start token and --target; notices on stderr."""
    trace = model.trace(source_for(args), args.target, interventions=interventions)
    for notice in trace.notices:
        say(f"warning: {notice}", sys.stderr)
    return trace


def say_differences(model, clean, intervened) -> None:
    """Each stack's difference at every stage, as the window's map: ‖Δ‖/‖clean‖ per layer
    (clean and intervened: whole passes over the same source and target)."""
    from ..core.analysis.seq2seq_differences import seq2seq_differences, seq2seq_grids
    from ..core.model.seq2seq_interventions import describe_all
    from ..core.model.stages import stage

    say(f"difference at every stage, ‖intervened − clean‖ / ‖clean‖ over every token, "
        f"{describe_all(intervened.interventions)}:")
    for side, grid in seq2seq_grids(seq2seq_differences(clean, intervened), model.config).items():
        say(f"  {side:<30}" + "".join(f"{'layer ' + str(layer):>10}" for layer in range(grid.values.shape[1])))
        for key, row in zip(grid.stages, grid.values):
            title = stage(key).title if key != "cross_attention" else "Cross-attention"
            say(f"    {title[:28]:<28}" + "".join(f"{_percent(v):>10}" for v in row))


def _percent(value: float) -> str:
    import math

    if math.isnan(value):
        return "·"
    if math.isinf(value):
        return "∞"
    return "0" if value == 0 else ("<0.1%" if value < 1e-3 else f"{100 * value:.1f}%")
