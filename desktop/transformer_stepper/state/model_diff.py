"""Two models side by side, without Qt: the model opened against the current one (B, the
reference of every ratio; the current one is A), the diff of their traces of the session's
text (core/analysis/model_diff.py), the attention pair of one head, the weights' own error; and the
logic of their requests on the session's Scheduler (state/scheduler.py).

The session traces A as it always does (typing is debounced there); each new trace of A is
handed to `set_trace`, which traces B on the same ids and compares, in a worker. Each kind of
request has its Latest (state/requests.py): a result that is no longer the latest is dropped,
and a diff still running for an older text is cancelled at its next layer. Notifies, through
`events`: changed() (a new diff, model B, or a message), busy(bool), attention(), weights()."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..core.analysis import model_diff
from ..core.model.errors import ModelError
from ..core.trace.trace import Trace
from ..io.loader import load_model
from .events import Events
from .requests import Latest, Requests
from .scheduler import Job, Scheduler

LANE = "model_diff"           # its own thread: the session's tracing never waits behind a diff


@dataclass(frozen=True)
class DiffResult:
    trace_a: Trace
    trace_b: Trace
    diff: model_diff.ModelDiff


def open_other(path: str, model_a, trace_a: Optional[Trace], progress=None):
    """Worker: open B, refuse what cannot be compared with A, and diff the current text."""
    model_b = load_model(path)
    if getattr(model_b, "is_seq2seq", False):
        raise ModelError(f"{path}: an encoder–decoder model — the Two Models tab compares one-stack "
                         "models; open the other translator (File → Open), then compare this one in its window's "
                         "Two models page, or with `transformer-stepper diff`")
    model_diff.check_same_shape(model_a.config, model_b.config, ("the open model", path))
    result = None if trace_a is None else trace_and_diff(model_a, trace_a, model_b, progress)
    return model_b, result


def trace_and_diff(model_a, trace_a: Trace, model_b, progress=None) -> DiffResult:
    """Worker: B on A's text (refused in one line when B's ids differ), then every layer
    compared; progress(done, total) after each layer (a cancelled job stops there)."""
    encoded = model_b.encode(trace_a.text)
    model_diff.check_same_tokens(trace_a.input_ids, trace_a.tokens, encoded.input_ids, encoded.tokens,
                                 ("the open model", "the compared model"))
    trace_b = model_b.trace_encoded(encoded, trace_a.text)
    n_layer = model_a.config.n_layer
    report = None if progress is None else (lambda i: progress(i + 1, n_layer))
    diff = model_diff.diff_traces(trace_a, trace_b, names=(model_a.name, model_b.name), progress=report)
    return DiffResult(trace_a, trace_b, diff)


def attention_pair(trace_a: Trace, trace_b: Trace, layer: int, head: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Worker: one head's attention weights in both traces."""
    return (layer, head, trace_a.head_array("attn_weights", layer, head),
            trace_b.head_array("attn_weights", layer, head))


def weight_errors(model_a, model_b) -> list[tuple[str, float]]:
    """Worker: every tensor's own error, largest first (reads every weight of both)."""
    errors = model_diff.weight_errors(model_a.params, model_b.params, list(model_a.params))
    return sorted(errors, key=lambda item: -item[1])


class TwoModels:
    def __init__(self, scheduler: Scheduler) -> None:
        self.workers = scheduler
        self.events = Events()
        self._requests = Requests()
        self._open, self._diff = Latest(self._requests), Latest(self._requests)
        self._attention, self._weights = Latest(self._requests), Latest(self._requests)
        self._running: Optional[Job] = None
        self.model_a = self.model_b = None
        self.path_b: Optional[str] = None
        self.result: Optional[DiffResult] = None
        self.pair: Optional[tuple[int, int, np.ndarray, np.ndarray]] = None
        self.weights: Optional[list[tuple[str, float]]] = None
        self.message = ""             # why there is no diff (a refusal, a failure), one line
        self.busy = False
        self.progress = (0, 0)
        self.active = True            # the tab is shown (set_active)
        self._pending: Optional[tuple] = None     # A's latest trace while hidden

    # -- requests --------------------------------------------------------------------------
    def open_other(self, path: str, model_a, trace_a: Optional[Trace]) -> None:
        """Open B against A (the open model) and diff A's trace."""
        self._diff.drop()
        self._cancel_running()
        number = self._open.new()
        self.model_a = model_a
        self._start(Job(number, open_other, (path, model_a, trace_a), reports=True, lane=LANE),
                    lambda n, value: self._opened(n, path, value), f"Opening {path}…")

    def set_active(self, active: bool) -> None:
        """Work only while the tab is shown: a trace of A that came meanwhile runs on showing."""
        self.active = active
        if active and self._pending is not None:
            self.set_trace(*self._pending)

    def set_trace(self, model_a, trace_a: Optional[Trace]) -> None:
        """The session's new trace of A (typing, or another model opened): B follows it (when
        the tab is shown; else on showing)."""
        if self.model_b is None or trace_a is None:
            return
        if not self.active:
            self._pending = (model_a, trace_a)
            return
        self._pending = None
        if model_a is not self.model_a:      # a new model A: B is checked against it again
            try:
                model_diff.check_same_shape(model_a.config, self.model_b.config, ("the open model", self.path_b))
            except ModelError as exc:
                self.model_a, self.result, self.pair = model_a, None, None
                self._say(str(exc))
                return
            self.model_a, self.weights = model_a, None
        self._cancel_running()
        number = self._diff.new()
        self._start(Job(number, trace_and_diff, (model_a, trace_a, self.model_b), reports=True, lane=LANE),
                    self._diffed, "Tracing the compared model…")

    def request_attention(self, layer: int, head: int) -> None:
        result = self.result
        if result is None or not 0 <= layer < result.trace_a.config.n_layer:
            return
        number = self._attention.new()
        self.workers.start(Job(number, attention_pair, (result.trace_a, result.trace_b, layer, head), lane=LANE),
                           self._attention_read, self._failed)

    def request_weights(self) -> None:
        if self.model_a is None or self.model_b is None:
            return
        number = self._weights.new()
        self.workers.start(Job(number, weight_errors, (self.model_a, self.model_b), lane=LANE),
                           self._weights_read, self._failed)

    def close_other(self) -> None:
        for latest in (self._open, self._diff, self._attention, self._weights):
            latest.drop()
        self._cancel_running()
        self.model_b = self.path_b = self.result = self.pair = self.weights = None
        self._pending = None
        self._set_busy(False)
        self._say("")

    # -- results ---------------------------------------------------------------------------
    def _start(self, job: Job, done, what: str) -> None:
        self._running = job
        self._set_busy(True, what)
        self.workers.start(job, done, self._failed, self._progressed, self._cancelled)

    def _opened(self, number: int, path: str, value) -> None:
        if not self._open.is_latest(number):
            return
        self.model_b, self.path_b, self.weights = value[0], path, None
        self._show(value[1])

    def _diffed(self, number: int, result: DiffResult) -> None:
        if self._diff.is_latest(number):
            self._show(result)

    def _show(self, result: Optional[DiffResult]) -> None:
        self._running = None
        self._set_busy(False)
        self.result, self.pair = result, None
        self._say("")

    def _failed(self, number: int, message: str, user_error: bool = True) -> None:
        if number in (self._open.number, self._diff.number):
            self._running = None
            self._set_busy(False)
            self.result, self.pair = None, None
            self._say(message)

    def _cancelled(self, number: int) -> None:
        if number in (self._open.number, self._diff.number):
            self._set_busy(False)

    def _progressed(self, number: int, done: int, total: int, *news) -> None:
        if number in (self._open.number, self._diff.number):
            self.progress = (done, total)
            self.events.notify("progress", done, total)

    def _attention_read(self, number: int, pair) -> None:
        if self._attention.is_latest(number) and self.result is not None:
            self.pair = pair
            self.events.notify("attention")

    def _weights_read(self, number: int, errors) -> None:
        if self._weights.is_latest(number):
            self.weights = errors
            self.events.notify("weights")

    def _cancel_running(self) -> None:
        if self._running is not None:
            self._running.cancel()
            self._running = None

    def _set_busy(self, busy: bool, what: str = "") -> None:
        self.busy = busy
        self.events.notify("busy", busy, what)

    def _say(self, message: str) -> None:
        self.message = message
        self.events.notify("changed")
