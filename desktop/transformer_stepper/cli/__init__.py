"""Command line: the app launcher (launch.py) and the headless subcommands, one module each
(trace, export, train, generate, compare, diff, check, positions_lab); console.py holds what they share.

Each subcommand module has `add_parser(sub)`, which declares its options and sets `run`, and a
`run_<name>(args)` returning the exit status. A user's error (ModelError, a bad command line)
ends in one `error:` line and status 2. Nothing under core/, io/ or ui/ imports this package;
it imports ui (Qt) only inside the commands that draw."""
from __future__ import annotations

import sys
from typing import Optional, Sequence

from ..core.model.errors import ModelError
from .console import Parser, UsageError, say

# in the order the app's --help names them
SUBCOMMANDS = ("trace", "export", "train", "generate", "compare", "diff", "check", "positions-lab")


def _parser() -> Parser:
    from . import check, compare, diff, export, generate, positions_lab, trace, train

    parser = Parser(
        prog="transformer-stepper",
        description="Step through what a transformer computes. With no subcommand, opens the app.")
    sub = parser.add_subparsers(dest="command")
    for command in (trace, export, generate, train, compare, diff, check, positions_lab):   # --help's order
        command.add_parser(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from ..runtime import tune_process

    tune_process()           # the app tunes further when it starts (ui/app.py)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            args = _parser().parse_args(argv)
            return args.run(args)
        from .launch import gui_parser, run_launcher

        return run_launcher(gui_parser(SUBCOMMANDS).parse_args(argv))
    except (ModelError, UsageError) as exc:
        say(f"error: {' '.join(str(exc).splitlines())}", sys.stderr)
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
