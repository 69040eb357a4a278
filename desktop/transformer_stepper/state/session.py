"""The live session, without Qt: model, text, trace and what the user is looking at, and the
logic of the requests that change them.

Opening a model and tracing text run through the scheduler (state/scheduler.py; in the app a
QThreadPool, ui/workers.py); each kind of request has its Latest (state/requests.py), and a
result that is no longer the latest (the user typed on, or opened another model) is dropped.
Typing is debounced by a scheduler timer; a pass still running for an older text is cancelled
at its next layer, and the latest text runs when it stops.

What the stage views draw besides the clean trace (the intervened pass, A − B) and the
interventions' requests are its base's, ShownTraceModel (state/shown_trace.py).

Besides those of its bases, it notifies busyChanged(bool, str), openFailed(str),
computeFailed(str) and textChanged(str)."""
from __future__ import annotations

from typing import Optional

from ..core.model.allocator import return_freed_memory
from ..core.trace.trace import DEFAULT_DETAIL_BUDGET, Trace
from .jobs import ComputeResult, LoadResult, compute_trace, load_and_trace, prepare_layer
from .requests import Latest
from .scheduler import Job, Scheduler
from .session_restore import SessionRestore
from .shown_trace import ShownTraceModel

# every word is in the built-in model's vocabulary; its pronoun head links "she" to "queen"
DEFAULT_TEXT = "The queen rode to the bank of the river and she was tired"
# typing waits this long for the next key before tracing: a pass still running for an older
# text is cancelled at its next layer, and a decoder re-traces only the changed tail, so a
# short wait costs little (MiniLM, 72 tokens: keystroke -> plots painted 72-106 ms at 15 ms,
# 103-138 at 40; tests/bench/bench_ui.py)
TEXT_DEBOUNCE_MS = 15
# with a trace this big on screen, the freed heap goes back to the system once the workers
# have been idle a quarter second (core/model/allocator.py): the process otherwise keeps the pages
# of every pass, layer and view computation over it. The price is paid by the next whole-text
# pass, which faults its pages in again (GPT-2-small-shaped, 1,000 tokens: ~0.3 s of system
# time on a 2.3 s pass; tests/bench/bench_ui_big.py); a smaller trace's heap stays for reuse
RETURN_MEMORY_FROM = 128 << 20
RETURN_MEMORY_AFTER_MS = 250
# a new trace's next layer is computed once the text rests this long: not while the window
# draws the trace (a worker beside the GUI thread makes its turns up to twice as long on two
# cores), nor for every keystroke of a text still being typed
NEXT_LAYER_DELAY_MS = 300


class SessionModel(ShownTraceModel):
    inline_work = False                  # views compute in workers (a snapshot for export: inline)

    def __init__(self, scheduler: Optional[Scheduler] = None, debounce_ms: int = TEXT_DEBOUNCE_MS,
                 **rest) -> None:
        if scheduler is None:
            raise TypeError("a SessionModel needs a scheduler (ui/workers.py's WorkerPool in the app)")
        super().__init__(scheduler=scheduler, **rest)     # (numbers its requests: _requests)
        scheduler.on_idle = self._workers_idle      # the heap goes back once nothing runs
        self._return_memory = scheduler.timer(RETURN_MEMORY_AFTER_MS, self._return_freed_memory)
        self._model_path: Optional[str] = None
        self.detail_budget = DEFAULT_DETAIL_BUDGET   # bytes of layer detail a trace keeps (a setting)
        self.weight_budget: Optional[int] = None      # bytes of widened weights a model keeps (a setting)
        self._text = DEFAULT_TEXT
        self.compute_seconds = 0.0
        self._load = Latest(self._requests)
        self._compute = Latest(self._requests)
        self._computing = False
        self._compute_again = False
        self._compute_task: Optional[Job] = None    # the running pass (cancelled when the text moves on)
        self._compute_text = ""
        self._loading_path: Optional[str] = None
        self._preparing: set[tuple[int, int]] = set()   # (id(trace), layer) being computed
        self.restore = SessionRestore(scheduler)         # a saved session's trace (File → Open Session)
        self._debounce = scheduler.timer(debounce_ms, self.compute_now)
        self._prepare_next = scheduler.timer(NEXT_LAYER_DELAY_MS, self._prepare_next_layer)

    def _prepare_next_layer(self) -> None:
        self.prepare_next_layer()

    # -- read-only state ---------------------------------------------------------------
    @property
    def model_path(self) -> Optional[str]:
        return self._model_path

    @property
    def text(self) -> str:
        return self._text

    @property
    def busy(self) -> bool:
        return self._loading_path is not None or self._computing

    # -- model -------------------------------------------------------------------------
    def open_model(self, path: Optional[str]) -> None:
        """Open a folder or file (None: the built-in model) in a worker; the old model, text and
        stage stay until the new one has opened, and stay for good if it fails."""
        number = self._load.new()
        self._loading_path = path or "the built-in model"
        self._notify("busyChanged", True, f"Opening {self._loading_path}…")
        self.workers.start(Job(number, load_and_trace, (path, self._text, self._layer, self.detail_budget,
                                                     self.weight_budget)),
                           self._on_loaded, self._on_load_failed)

    def _on_loaded(self, request_id: int, result: LoadResult) -> None:
        if not self._load.is_latest(request_id):
            return
        self._loading_path = None
        self._model_path = result.path
        traced = result.text == self._text and result.trace is not None
        self._compute.drop()                      # any compute for the old model is stale now
        self.restore.cancel()                     # (a session's own model: restored after this)
        self._drop_interventions()                # the old model's heads and rows mean nothing now
        # the model and its trace (or none) are in place before anyone hears of either
        self._take_model(result.model, result.trace if traced else None)
        self._preparing.clear()
        self.set_temperature(1.0)                 # (a what-if on the old model's trace)
        if traced:
            self.compute_seconds = result.seconds
        self._notify("interventionsChanged")
        self._notify("modelChanged")
        self._notify("layerChanged", self._layer)
        self._notify("headChanged", self._head)
        self._notify("stageChanged", self._stage)
        self._announce_trace()
        if not traced:
            if result.text == self._text:
                self._notify("computeFailed", result.trace_error or "the text did not trace")
            else:                      # typed on while the model opened
                self.compute_now()
        self._emit_busy()

    def _on_load_failed(self, request_id: int, message: str, user_error: bool) -> None:
        if not self._load.is_latest(request_id):
            return
        self._loading_path = None
        self._emit_busy()
        self._notify("openFailed", message)

    # -- text and trace ----------------------------------------------------------------
    def set_text(self, text: str, immediate: bool = False) -> None:
        """Typing lands here: the model re-runs after a short pause (or at once)."""
        if text != self._text:
            self._text = text
            self._notify("textChanged", text)
        if immediate:
            self._debounce.stop()
            self.compute_now()
        else:
            self._debounce.start()

    def compute_now(self) -> None:
        if self._model is None:
            return
        if self._computing:            # one forward pass at a time: the running one stops at its
            self._compute_again = True  # next layer, then the latest text runs
            if self._compute_task is not None and self._compute_text != self._text:
                self._compute_task.cancel()
            return
        self._computing = True
        self._emit_busy()
        self._compute_text = self._text
        self._compute_task = Job(self._compute.new(), compute_trace,
                                 (self._model, self._text, self._layer, self._trace, self.detail_budget),
                                 reports=True)
        self.workers.start(self._compute_task, self._on_computed, self._on_compute_failed,
                           self._on_compute_progress, lambda _: self._compute_done())

    def _on_compute_progress(self, request_id: int, done: int, total: int) -> None:
        if self._compute.is_latest(request_id) and self._computing and self._loading_path is None:
            self._notify("busyChanged", True, f"Computing… layer {done} of {total}")

    def _compute_done(self) -> None:
        self._computing = False
        self._compute_task = None
        if self._compute_again:
            self._compute_again = False
            self.compute_now()
        else:
            self._emit_busy()

    def _on_computed(self, request_id: int, result: ComputeResult) -> None:
        if (self._compute.is_latest(request_id) and result.model is self._model
                and result.text == self._text):
            self._accept_trace(result.trace, result.seconds)
        self._compute_done()

    def _on_compute_failed(self, request_id: int, message: str, user_error: bool) -> None:
        if self._compute.is_latest(request_id):
            if user_error:
                self._notify("computeFailed", message)
            else:
                self._notify("openFailed", f"computing the trace failed: {message}")
        self._compute_done()

    def next_request(self) -> int:
        """A number for a worker request: every load, compute or generation step takes the next."""
        return self._requests.next()

    def show_trace(self, trace: Trace, seconds: float) -> None:
        """Show a trace made from the current one (a generation step, or one undone): its text
        becomes the text, without tracing it again (its pieces need not re-tokenize alike)."""
        self._debounce.stop()
        self._compute.new()                                 # a compute in flight is stale now
        self._text = trace.text
        self._accept_trace(trace, seconds)
        self._notify("textChanged", trace.text)

    def _accept_trace(self, trace: Trace, seconds: float) -> None:
        self._take_trace(trace)          # the previous trace is released here (views keep none)
        self._intervention = None        # it compared the previous trace
        self._preparing.clear()
        # the softmax temperature is a what-if on the trace it was set on: a new one (typing, a
        # generation step, another model) shows the model's own weights again
        self.set_temperature(1.0)
        self.compute_seconds = seconds
        self._announce_trace()

    def _announce_trace(self) -> None:
        self.prepare_layer(self._layer)
        self._notify("traceChanged")
        self._prepare_next.start()                  # the next layer, while the user reads
        if self._interventions:
            self._run_interventions()
            self._notify("interventionsChanged")

    def _emit_busy(self) -> None:
        if self._loading_path is not None:
            self._notify("busyChanged", True, f"Opening {self._loading_path}…")
        elif self._computing:
            self._notify("busyChanged", True, "Computing…")
        else:
            self._notify("busyChanged", False, "")

    # -- a layer's detail is computed off the GUI thread -------------------------------------
    def layer_ready(self, layer: Optional[int] = None, trace: Optional[Trace] = None) -> bool:
        """Can the views read this layer's detail (default: the current layer) of `trace`
        (default: the clean one) without computing it on the GUI thread?"""
        trace = self._trace if trace is None else trace
        return trace is None or trace.is_ready(self._layer if layer is None else layer)

    def prepare_layer(self, layer: int, trace: Optional[Trace] = None) -> None:
        """Compute a layer's detail of `trace` (default: the clean one) in a worker (if not done
        or under way); layerReady follows."""
        trace = self._trace if trace is None else trace
        if trace is None or not 0 <= layer < trace.config.n_layer or trace.is_ready(layer):
            return
        key = (id(trace), layer)
        if key in self._preparing:
            return
        self._preparing.add(key)
        self.workers.start(Job(self.next_request(), prepare_layer, (trace, layer)),
                           lambda _, result: self._on_layer_prepared(key, result),
                           lambda _, message, user_error: self._on_layer_failed(key, message))

    def _on_layer_prepared(self, key: tuple[int, int], result) -> None:
        self._preparing.discard(key)
        trace, layer = result
        if trace is self._trace or trace is self.shown_trace:
            self._notify("layerReady", layer)
        if trace is self._trace and layer == self._layer:
            self.prepare_next_layer()               # the shown one held: the next, if it fits

    def _on_layer_failed(self, key: tuple[int, int], message: str) -> None:
        self._preparing.discard(key)
        self._notify("computeFailed", f"computing layer {key[1]} failed: {message}")

    def set_detail_budget(self, nbytes: int) -> None:
        """The user's detail budget: every trace from now on keeps that many bytes of layer
        detail; the traces shown now give back what is over it at once."""
        self.detail_budget = max(int(nbytes), 0)
        for trace in {id(t): t for t in (self._trace, self.intervened_trace) if t is not None}.values():
            trace.cache.set_budget(self.detail_budget)

    def trace_memory(self) -> int:
        """Bytes the current trace holds (residual stream, cached layer detail)."""
        return 0 if self._trace is None else self._trace.nbytes()

    # -- memory -------------------------------------------------------------------------
    def _workers_idle(self) -> None:
        if self.trace_memory() >= RETURN_MEMORY_FROM:
            self._return_memory.start()

    def _return_freed_memory(self) -> None:
        if self.workers.idle:            # not while a worker's arrays are being made
            return_freed_memory()

    # -- shutdown ----------------------------------------------------------------------
    def shutdown(self, msecs: int = -1) -> bool:
        """Drop every pending result and wait for the workers (teardown, window close)."""
        self._debounce.stop()
        self._prepare_next.stop()
        self._drop_pending_interventions()
        for latest in (self._load, self._compute):
            latest.drop()
        self.restore.cancel()
        self._compute_again = False
        return self.workers.wait(msecs)
