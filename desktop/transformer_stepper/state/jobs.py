"""The work the session runs off the GUI thread: opening a model (and tracing the text on it),
tracing typed text, the intervened pass, a layer's detail. Plain functions of plain data; a
scheduler (state/scheduler.py) runs them and hands the result back."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Optional

from ..core.model.blas import blas_threads
from ..core.analysis.differences import Difference, intervene_and_compare
from ..core.model.errors import ModelError
from ..core.trace.model import Model
from ..core.trace.trace import DEFAULT_DETAIL_BUDGET, Trace
from ..io.loader import load_model

LONG_TEXT = 256          # tokens from which a forward pass runs BLAS on every core


@dataclass(frozen=True)
class LoadResult:
    path: Optional[str]             # None = the built-in model
    text: str
    model: Model
    trace: Optional[Trace]
    trace_error: Optional[str]      # the model opened but the text did not trace
    seconds: float                  # forward pass time


@dataclass(frozen=True)
class ComputeResult:
    model: Model
    text: str
    trace: Trace
    seconds: float


def load_and_trace(path: Optional[str], text: str, layer: int = 0,
                   detail_budget: int = DEFAULT_DETAIL_BUDGET,
                   weight_budget: Optional[int] = None) -> LoadResult:
    """Open and trace; `weight_budget` (bytes of widened weights the model keeps, the window's
    setting) applies from the first trace on, not after it."""
    model = load_model(path)
    if weight_budget is not None and hasattr(model.params, "set_budget"):
        model.params.set_budget(weight_budget)
    if getattr(model, "is_seq2seq", False):     # its own window: ui/seq2seq/
        raise ModelError(f"{path}: {model.config.family} is an encoder–decoder; open it in its own "
                         f"window with `transformer-stepper --model PATH` (or trace|generate|export "
                         f"--source TEXT)")
    start = time.perf_counter()
    try:
        trace = model.trace(text, detail_budget, detail_layers=(min(layer, model.config.n_layer - 1),))
    except ModelError as exc:
        return LoadResult(path, text, model, None, str(exc), 0.0)
    return LoadResult(path, text, model, trace, None, time.perf_counter() - start)


def compute_trace(model: Model, text: str, layer: int = 0, previous: Optional[Trace] = None,
                  detail_budget: Optional[int] = None,
                  progress: Optional[Callable[[int, int], None]] = None) -> ComputeResult:
    """The pass records the layer on screen, so the first view needs no second computation;
    it reports each layer done (and stops there when the task is cancelled). A causal model
    starts from `previous` (the trace on screen): the tokens it shares with the edited text
    are taken from it, only the rest computed (Model.retrace)."""
    start = time.perf_counter()
    n_layer = model.config.n_layer
    after_layer = None if progress is None else (lambda i: progress(i + 1, n_layer))
    encoded = model.encode(text)
    detail = (min(layer, n_layer - 1),)
    # the app runs OpenBLAS on one thread (runtime.py); a long text's pass has matrices big
    # enough to pay for every core (GPT-2-small-shaped, 1,000 tokens: 2.2-2.6 -> 1.8-2.2 s;
    # under LONG_TEXT the extra thread only costs: tests/bench/bench_ui_big.py, bench_ui.py)
    threads = os.cpu_count() if len(encoded.input_ids) >= LONG_TEXT else None
    with blas_threads(threads):
        trace = model.retrace(previous, encoded, text, detail_layers=detail, after_layer=after_layer,
                              detail_budget=detail_budget)
    return ComputeResult(model, text, trace, time.perf_counter() - start)


@dataclass(frozen=True)
class InterventionResult:
    clean: Trace                    # the trace it was compared with
    interventions: tuple
    trace: Trace                    # the clean trace's tokens, intervened
    differences: dict[tuple[str, Optional[int]], Difference]   # core.analysis.differences.stage_differences
    seconds: float


def run_interventions(model: Model, clean: Trace, interventions: tuple) -> InterventionResult:
    """The intervened pass beside `clean`, and how far every stage moved
    (core.analysis.differences.intervene_and_compare)."""
    start = time.perf_counter()
    trace, differences = intervene_and_compare(model, clean, interventions)
    return InterventionResult(clean, tuple(interventions), trace, differences, time.perf_counter() - start)


def prepare_layer(trace: Trace, layer: int) -> tuple[Trace, int]:
    trace.prepare(layer)
    return trace, layer
