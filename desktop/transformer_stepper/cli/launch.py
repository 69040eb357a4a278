"""`transformer-stepper [--model PATH] [--text TEXT]`: open the app; `--install-desktop-entry`
/ `--uninstall-desktop-entry` add or remove its launcher entry; `--version`. Qt is imported only
when the app opens."""
from __future__ import annotations

import argparse

from .console import Parser, say


def gui_parser(subcommands) -> argparse.ArgumentParser:
    parser = Parser(
        prog="transformer-stepper",
        description="Step through what a transformer computes. Subcommands: " + ", ".join(subcommands)
                    + " (see transformer-stepper SUBCOMMAND --help).")
    parser.add_argument("session", nargs="?", help="a .stepper session file to open")
    parser.add_argument("--model", help="HF folder, .safetensors, .gguf or .npz (default: built-in model)")
    parser.add_argument("--text", help="the sentence to open on")
    parser.add_argument("--version", action="version", version=f"transformer-stepper {_version()}")
    parser.add_argument("--install-desktop-entry", action="store_true",
                        help="add the app to the desktop's launcher (~/.local/share) and exit")
    parser.add_argument("--uninstall-desktop-entry", action="store_true",
                        help="remove the launcher entry and icons again and exit")
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


def _desktop_entry(install: bool) -> int:
    from .. import desktop_entry

    files = desktop_entry.install() if install else desktop_entry.uninstall()
    for path in files:
        say(f"{'wrote' if install else 'removed'} {path}")
    if not install and not files:
        say("no desktop entry was installed")
    return 0


def run_launcher(args: argparse.Namespace) -> int:
    if args.install_desktop_entry or args.uninstall_desktop_entry:
        return _desktop_entry(install=args.install_desktop_entry)
    import os
    import sys

    from .qt_check import xcb_cursor_problem

    problem = xcb_cursor_problem(os.environ)
    if problem:                                  # before Qt starts, which would abort
        print(problem, file=sys.stderr)
        return 2
    from ..ui.app import run

    if args.session and not args.session.endswith(".stepper"):
        from .console import UsageError

        raise UsageError(f"{args.session}: not a session file (.stepper); open a model with --model PATH")
    return run(model_path=args.model, text=args.text, session_file=args.session)
