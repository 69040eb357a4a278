"""Work off the GUI thread: opening a model and running a traced forward pass.

A Task runs one plain function on a QThreadPool; its result or its one-line error crosses back
to the GUI thread only through Qt signals (queued, because the signals object lives in the GUI
thread). Workers never touch a widget. Whoever starts a task decides whether its result is
still wanted (the session's request counter); a stale result is simply dropped.

A function that takes a `progress` keyword reports through it (`progress(done, total)`, e.g.
layers of a forward pass), and through it a Task is cancelled: once `cancel()` is called, the
next report raises Cancelled inside the function, which ends with the `cancelled` signal."""
from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Optional

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from ..core.differences import Difference, intervene_and_compare
from ..core.blas import blas_threads
from ..core.errors import ModelError
from ..core.model import Model
from ..core.trace import Trace
from ..io.loader import load_model


class TaskSignals(QObject):
    finished = Signal(int, object)      # request id, result
    failed = Signal(int, str, bool)     # request id, one-line message, is_user_error
    progress = Signal(int, int, int)    # request id, done, total
    cancelled = Signal(int)             # request id: stopped at a progress report


class Cancelled(Exception):
    """Raised inside a task's function at its next progress report after cancel()."""


class Task(QRunnable):
    def __init__(self, request_id: int, function: Callable[..., Any], *args: Any,
                 reports: bool = False) -> None:
        """`reports`: pass the function a `progress` keyword (and so make it cancellable)."""
        super().__init__()
        self.setAutoDelete(False)       # the Python side keeps it until its signal arrives
        self.request_id = request_id
        self.function = function
        self.args = args
        self.reports = reports
        self.signals = TaskSignals()
        self._cancelled = False

    def cancel(self) -> None:
        """Stop at the function's next progress report (a function that reports none runs on)."""
        self._cancelled = True

    def report(self, done: int, total: int) -> None:
        if self._cancelled:
            raise Cancelled()
        self.signals.progress.emit(self.request_id, done, total)

    def run(self) -> None:
        # Qt may keep the finished runnable (and so this object) alive after its result is
        # delivered: drop the arguments first, so a task never keeps a trace or model alive
        function, args = self.function, self.args
        self.function, self.args = None, ()
        try:
            result = function(*args, progress=self.report) if self.reports else function(*args)
        except Cancelled:
            self.signals.cancelled.emit(self.request_id)
        except ModelError as exc:
            self.signals.failed.emit(self.request_id, str(exc), True)
        except MemoryError:
            self.signals.failed.emit(self.request_id, "out of memory", True)
        except Exception as exc:  # a bug: report it rather than lose it in a thread
            traceback.print_exc()
            self.signals.failed.emit(self.request_id, f"{type(exc).__name__}: {exc}", False)
        else:
            self.signals.finished.emit(self.request_id, result)
        finally:
            del function, args


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


def load_and_trace(path: Optional[str], text: str, layer: int = 0) -> LoadResult:
    model = load_model(path)
    if getattr(model, "is_seq2seq", False):     # its own window: ui/seq2seq/
        raise ModelError(f"{path}: {model.config.family} is an encoder–decoder; open it in its own "
                         f"window with `transformer-stepper --model PATH` (or trace|generate|export "
                         f"--source TEXT)")
    start = time.perf_counter()
    try:
        trace = model.trace(text, detail_layers=(min(layer, model.config.n_layer - 1),))
    except ModelError as exc:
        return LoadResult(path, text, model, None, str(exc), 0.0)
    return LoadResult(path, text, model, trace, None, time.perf_counter() - start)


def compute_trace(model: Model, text: str, layer: int = 0, previous: Optional[Trace] = None,
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
        trace = model.retrace(previous, encoded, text, detail_layers=detail, after_layer=after_layer)
    return ComputeResult(model, text, trace, time.perf_counter() - start)


@dataclass(frozen=True)
class InterventionResult:
    clean: Trace                    # the trace it was compared with
    interventions: tuple
    trace: Trace                    # the clean trace's tokens, intervened
    differences: dict[tuple[str, Optional[int]], Difference]   # core.differences.stage_differences
    seconds: float


def run_interventions(model: Model, clean: Trace, interventions: tuple) -> InterventionResult:
    """The intervened pass beside `clean`, and how far every stage moved
    (core.differences.intervene_and_compare)."""
    start = time.perf_counter()
    trace, differences = intervene_and_compare(model, clean, interventions)
    return InterventionResult(clean, tuple(interventions), trace, differences, time.perf_counter() - start)


def prepare_layer(trace: Trace, layer: int) -> tuple[Trace, int]:
    trace.prepare(layer)
    return trace, layer


class WorkerPool:
    """A private QThreadPool (so tests and shutdown can wait for exactly our work) that keeps
    each running Task alive until its result has been delivered."""

    def __init__(self, max_threads: int = 2, on_idle: Optional[Callable[[], None]] = None) -> None:
        """`on_idle()` is called (on the GUI thread) each time the last running task ends."""
        self.pool = QThreadPool()
        self.pool.setMaxThreadCount(max_threads)
        self._running: set[Task] = set()
        self._on_idle = on_idle

    def start(self, task: Task, on_finished: Callable[[int, object], None],
              on_failed: Callable[[int, str, bool], None],
              on_progress: Optional[Callable[[int, int, int], None]] = None,
              on_cancelled: Optional[Callable[[int], None]] = None) -> None:
        self._running.add(task)
        task.signals.finished.connect(on_finished)
        task.signals.failed.connect(on_failed)
        if on_progress is not None:
            task.signals.progress.connect(on_progress)
        if on_cancelled is not None:
            task.signals.cancelled.connect(on_cancelled)
        for ended in (task.signals.finished, task.signals.failed, task.signals.cancelled):
            ended.connect(lambda *_: self._ended(task))
        self.pool.start(task)

    def _ended(self, task: Task) -> None:
        if task in self._running:
            self._running.discard(task)
            if not self._running and self._on_idle is not None:
                self._on_idle()

    @property
    def idle(self) -> bool:
        return not self._running

    def wait(self, msecs: int = -1) -> bool:
        return self.pool.waitForDone(msecs)

    def active(self) -> int:
        return self.pool.activeThreadCount()
