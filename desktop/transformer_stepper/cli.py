"""Command line: the app launcher and the headless subcommands (trace, export, train, generate,
compare, positions-lab)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .core.errors import ModelError

SUBCOMMANDS = ("trace", "export", "train", "generate", "compare", "positions-lab")


def _say(text: str, stream=None) -> None:
    """print, but a path with undecodable bytes (lone surrogates) never crashes it: stdout is
    strict in a UTF-8 locale."""
    stream = stream or sys.stdout
    try:
        print(text, file=stream)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        print(text.encode(encoding, "backslashreplace").decode(encoding), file=stream)


def _trace(args: argparse.Namespace) -> int:
    from .io.array_export import save_npz
    from .io.loader import load_model

    out = Path(args.out)
    if out.suffix.lower() != ".npz":  # checked before the slow part
        raise ModelError(f"{out}: the output file must end in .npz")
    if not out.parent.is_dir():
        raise ModelError(f"{out.parent}: folder does not exist")
    model = load_model(args.model)
    for warning in model.warnings:
        _say(f"warning: {warning}", sys.stderr)
    trace = model.trace(args.text)
    if trace.truncated:
        _say(f"warning: the text is longer than the model's context; truncated to "
             f"{model.config.n_ctx} tokens", sys.stderr)
    if not np.isfinite(trace.hidden_states).all():
        _say(f"warning: {model.source or model.name}: the forward pass produced inf or NaN "
             f"(are the weights corrupt?)", sys.stderr)
    save_npz(out, trace)  # atomic; an OSError becomes one ModelError line naming the file
    _say(f"wrote {out}: {trace.n_seq} tokens, {len(trace.names())} arrays")
    return 0


def _export(args: argparse.Namespace) -> int:
    from .ui.export_cli import run_export

    return run_export(args, _say)


def _train(args: argparse.Namespace) -> int:
    from .io.training_cli import run_train

    return run_train(args)


def _generate(args: argparse.Namespace) -> int:
    from .core.generate import Sampling, generate
    from .io.array_export import save_npz
    from .io.loader import load_model

    out = Path(args.trace) if args.trace else None
    if out is not None and out.suffix.lower() != ".npz":
        raise ModelError(f"{out}: the trace file must end in .npz")
    if out is not None and not out.parent.is_dir():
        raise ModelError(f"{out.parent}: folder does not exist")
    if args.tokens < 1:
        raise ModelError(f"--tokens must be at least 1, got {args.tokens}")
    sampling = Sampling(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    model = load_model(args.model)
    for warning in model.warnings:
        _say(f"warning: {warning}", sys.stderr)
    if not model.can_generate:
        raise ModelError(f"{model.name}: generation needs a causal model with an output head "
                         f"(this is a {model.config.family} {'encoder' if not model.config.causal else 'model without a head'})")
    prompt = model.trace(args.text)
    steps = generate(model, prompt, args.tokens, sampling)
    final = steps[-1] if steps else prompt
    if len(steps) < args.tokens:
        _say(f"warning: the context is full ({model.config.n_ctx} tokens): stopped after "
             f"{len(steps)} tokens", sys.stderr)
    _say(final.text[len(prompt.text):])
    if out is not None:
        save_npz(out, final)
        _say(f"wrote {out}: {final.n_seq} tokens ({len(steps)} generated)", sys.stderr)
    return 0


def _positions_lab(args: argparse.Namespace) -> int:
    from .io.positions_lab_cli import run_positions_lab
    from .ui.positions.headless import write_lab_figures

    return run_positions_lab(args, _say, write_lab_figures)


def _compare(args: argparse.Namespace) -> int:
    from .ui.compare.headless import run_compare

    return run_compare(args, _say)


class _UsageError(Exception):
    """A bad command line; reported as one `error:` line like every other user error."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage block and exit
        raise _UsageError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="transformer-stepper",
        description="Step through what a transformer computes. With no subcommand, opens the app.")
    sub = parser.add_subparsers(dest="command")
    trace = sub.add_parser("trace", help="write every intermediate of one forward pass to .npz")
    trace.add_argument("--model", help="HF folder, .safetensors or .npz (default: built-in model)")
    trace.add_argument("--text", required=True)
    trace.add_argument("--out", required=True, help="output .npz")
    export = sub.add_parser("export", help="render every stage's plots to image files (no display)")
    export.add_argument("--model")
    export.add_argument("--text", required=True)
    export.add_argument("--out", required=True, help="output folder")
    export.add_argument("--format", choices=("png", "svg"), default="png")
    export.add_argument("--layer", type=int, default=0)
    export.add_argument("--head", type=int, default=0)
    export.add_argument("--scale", type=float, default=1.0)
    gen = sub.add_parser("generate", help="continue a text token by token (decoders), print the continuation")
    gen.add_argument("--model")
    gen.add_argument("--text", required=True)
    gen.add_argument("--tokens", type=int, default=20, help="how many tokens to add (default 20)")
    gen.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    gen.add_argument("--top-k", type=int, default=0, help="0 = off")
    gen.add_argument("--top-p", type=float, default=1.0, help="1 = off")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--trace", help="also write the final trace as .npz")
    train = sub.add_parser("train", help="train the built-in teaching model from scratch")
    train.add_argument("--out", required=True, help="output model folder")
    train.add_argument("--steps", type=int, default=None)
    train.add_argument("--seed", type=int, default=None)
    train.add_argument("--recipe", choices=("builtin", "quick"), default="builtin",
                       help="builtin: the shipped model's recipe (default); quick: about 45 s")
    train.add_argument("--snapshots", type=int, default=None,
                       help="E snapshots kept in history.npz, at most (default 64)")
    compare = sub.add_parser("compare", help="the same word in 2-8 sentences: every Compare "
                                             "figure and compare.csv (no display)")
    compare.add_argument("--model", help="HF folder, .safetensors or .npz (default: built-in model)")
    compare.add_argument("--word", default="", help="the word compared (its first occurrence in each)")
    compare.add_argument("--text", action="append", required=True, help="a sentence; repeat, 2 to 8")
    compare.add_argument("--out", required=True, help="output folder")
    compare.add_argument("--format", choices=("png", "svg"), default="png")
    compare.add_argument("--layer", type=int, default=None, help="attention plot's layer (default: last)")
    compare.add_argument("--head", type=int, default=0)
    compare.add_argument("--scale", type=float, default=1.0)
    lab = sub.add_parser("positions-lab", help="retrain the positions laboratory's variants (sum, "
                                               "learned, concat, rotary, none) and measure them")
    lab.add_argument("--out", required=True, help="a new folder: the models, results.csv, results.json, "
                                                   "figures (PNG)")
    lab.add_argument("--steps", type=int, default=3000, help="training steps per model (default 3000)")
    lab.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 (default 1)")
    lab.add_argument("--variant", action="append",
                     help="only this variant (repeatable; default all five)")
    return parser


def _gui_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="transformer-stepper",
        description="Step through what a transformer computes. Subcommands: " + ", ".join(SUBCOMMANDS)
                    + " (see transformer-stepper SUBCOMMAND --help).")
    parser.add_argument("--model", help="HF folder, .safetensors or .npz (default: built-in model)")
    parser.add_argument("--text", help="the sentence to open on")
    parser.add_argument("--version", action="version", version=f"transformer-stepper {_version()}")
    parser.add_argument("--install-desktop-entry", action="store_true",
                        help="add the app to the desktop's launcher (~/.local/share) and exit")
    parser.add_argument("--uninstall-desktop-entry", action="store_true",
                        help="remove the launcher entry and icons again and exit")
    return parser


def _version() -> str:
    from . import __version__

    return __version__


def _desktop_entry(install: bool) -> int:
    from . import desktop_entry

    files = desktop_entry.install() if install else desktop_entry.uninstall()
    for path in files:
        _say(f"{'wrote' if install else 'removed'} {path}")
    if not install and not files:
        _say("no desktop entry was installed")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from .runtime import tune_process

    tune_process()           # the app tunes further when it starts (ui/app.py)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            args = _parser().parse_args(argv)
            return {"trace": _trace, "export": _export, "train": _train,
                    "generate": _generate, "compare": _compare,
                    "positions-lab": _positions_lab}[args.command](args)
        args = _gui_parser().parse_args(argv)
        if args.install_desktop_entry or args.uninstall_desktop_entry:
            return _desktop_entry(install=args.install_desktop_entry)
        from .ui.app import run

        return run(model_path=args.model, text=args.text)
    except (ModelError, _UsageError) as exc:
        _say(f"error: {' '.join(str(exc).splitlines())}", sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`... | head`): stop quietly, as other command-line tools do;
        # point stdout at devnull so the interpreter's final flush does not raise again
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
