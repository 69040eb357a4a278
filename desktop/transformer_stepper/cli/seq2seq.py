"""What `trace`, `export` and `generate` share for encoder–decoder models: --source (the text the
encoder reads once) and --target (the target so far, for teacher forcing)."""
from __future__ import annotations

import argparse
import sys

from ..core.model.errors import ModelError
from .console import say


def add_arguments(parser) -> None:
    parser.add_argument("--source", help="encoder–decoder models: the source text (what --text is for other models)")
    parser.add_argument("--target", default="", help="encoder–decoder models: the target so far (teacher forcing)")


def is_seq2seq(model) -> bool:
    return getattr(model, "is_seq2seq", False)


def check_text(args: argparse.Namespace) -> None:
    if args.text is None and args.source is None:
        raise ModelError("give the text: --text TEXT (or --source TEXT for an encoder–decoder)")


def text_for(args: argparse.Namespace, model) -> str:
    """The single text of a one-stack model; refuses --source/--target there."""
    if is_seq2seq(model):
        raise AssertionError("encoder–decoder models take source_for")
    if args.source is not None or args.target:
        raise ModelError(f"{model.name}: --source/--target are for encoder–decoder models; "
                         f"this is a {model.config.family} model: use --text")
    return args.text


def source_for(args: argparse.Namespace) -> str:
    if args.source is not None and args.text is not None:
        raise ModelError("give the source once: --source TEXT (--text is the same for an encoder–decoder)")
    return args.source if args.source is not None else args.text


def seq2seq_trace(args: argparse.Namespace, model):
    """The encoder over --source, the decoder over its start token and --target; notices on stderr."""
    trace = model.trace(source_for(args), args.target)
    for notice in trace.notices:
        say(f"warning: {notice}", sys.stderr)
    return trace
