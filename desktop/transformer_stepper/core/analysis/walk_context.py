"""What every walk readout shares (core/walk_readouts*.py): the registry by name, and the step's
state on one model (Context) with the trace and comparison its readouts share, computed once."""
from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from .compare import Comparison, compare, pick, piece_text
from ..model.errors import ModelError
from .labels import default_token
from ..trace.model import Model
from ..trace.trace import Trace

# a walk's own training run (the quick recipe, cut short): enough steps for every plot of the
# Training tab to be drawn, in seconds
WALK_TRAINING_STEPS = 200

Readout = Callable[["Context"], dict]
READOUTS: dict[str, Readout] = {}


def readout(name: str, context: "Context") -> dict:
    if name not in READOUTS:
        raise ModelError(f"no readout named '{name}' (known: {', '.join(sorted(READOUTS))})")
    return READOUTS[name](context)


def _register(function: Readout) -> Readout:
    READOUTS[function.__name__.removeprefix("read_")] = function
    return function


class Context:
    """A step's state on one model, with what its readouts share computed once: the trace of
    the text, the comparison of the sentences, the selected token."""

    def __init__(self, model: Model, state, extras: Mapping) -> None:
        self.model, self.state, self.extras = model, state, extras
        self.config = model.config
        self._trace: Optional[Trace] = None
        self._comparison: Optional[Comparison] = None
        self._position: Optional[int] = None

    @property
    def trace(self) -> Trace:
        if self._trace is None:
            self._trace = self.model.trace(self.state.text)
        return self._trace

    @property
    def comparison(self) -> Comparison:
        if self._comparison is None:
            self._comparison = compare(self.model, self.state.sentences, self.state.word)
        return self._comparison

    @property
    def position(self) -> int:
        """The selected token: the step's word in the text (its first token), else the default."""
        if self._position is None:
            found = pick(self.trace, self.model.tokenizer, self.state.select) if self.state.select else None
            self._position = (found.position if found is not None and found.position is not None
                              else default_token(self.trace))
        return self._position

    def label(self, index: int, trace: Optional[Trace] = None) -> str:
        return piece_text((trace or self.trace).tokens[index]) or repr((trace or self.trace).tokens[index])


def _f(value) -> float:
    return float(np.asarray(value, dtype=np.float64))


