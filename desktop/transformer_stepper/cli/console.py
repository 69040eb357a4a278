"""What every command shares: printing that survives any path, one-line usage errors, and the
checks of the options several commands take."""
from __future__ import annotations

import argparse
import math
import sys

from ..core.model.errors import ModelError

MIN_SCALE, MAX_SCALE = 0.25, 8.0     # --scale of the figure-writing commands (export, compare)


def say(text: str, stream=None) -> None:
    """print, but a path with undecodable bytes (lone surrogates) never crashes it: stdout is
    strict in a UTF-8 locale."""
    stream = stream or sys.stdout
    try:
        print(text, file=stream)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        print(text.encode(encoding, "backslashreplace").decode(encoding), file=stream)


class UsageError(Exception):
    """A bad command line; reported as one `error:` line like every other user error."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage block and exit
        raise UsageError(f"{message} (see {self.prog} --help)")


def check_scale(scale: float) -> None:
    if not math.isfinite(scale) or not MIN_SCALE <= scale <= MAX_SCALE:
        raise ModelError(f"--scale {scale:g}: must be between {MIN_SCALE:g} and {MAX_SCALE:g}")


def warn_non_finite(model, trace, drawn: bool = False) -> bool:
    """One warning line when the pass produced NaN or Inf (corrupt weights): the numbers are
    shown as they are, non-finite cells marked, and nothing throws. -> whether it warned."""
    import numpy as np

    if np.isfinite(trace.hidden_states).all():
        return False
    how = ("; non-finite values are drawn as hatched cells and left out of ranges and maps"
           if drawn else "")
    say(f"warning: {model.source or model.name}: the forward pass produced inf or NaN "
        f"(are the weights corrupt?){how}", sys.stderr)
    return True
