"""The one state object of the app: model, text, trace and what the user is looking at.

Widgets call its methods and react to its signals; nothing else holds state. Opening a model and
tracing text run in workers; each request gets a number, and a result that is no longer the
latest request (the user typed on, or opened another model) is dropped.

Interventions live here too: the active ones, the intervened trace of the current text (run in
a worker beside the clean one, again whenever the clean trace changes) and whether the stepper
shows it. `trace` is always the clean model's; `shown_trace` is what the stage views draw, so
showing the clean model again is only a flag: nothing is recomputed or restored."""
from __future__ import annotations

from typing import Optional

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal

from ..core import stages
from ..core.model import Model
from ..core.trace import Trace
from . import analysis
from .workers import (ComputeResult, InterventionResult, LoadResult, Task, WorkerPool, compute_trace,
                      load_and_trace, prepare_layer, run_interventions)

# every word is in the built-in model's vocabulary; its pronoun head links "she" to "queen"
DEFAULT_TEXT = "The queen rode to the bank of the river and she was tired"
TEXT_DEBOUNCE_MS = 40


class Session(QObject):
    modelChanged = Signal()              # a new model is in place; traceChanged follows
    traceChanged = Signal()              # a new trace (new text or new model)
    layerChanged = Signal(int)
    layerReady = Signal(int)             # a layer's detail has been computed (in a worker)
    headChanged = Signal(int)
    selectionChanged = Signal(int)       # the selected token (query) index
    stageChanged = Signal(str)
    temperatureChanged = Signal(float)
    busyChanged = Signal(bool, str)      # work under way, what it is
    openFailed = Signal(str)             # a model did not open: one line naming the problem
    computeFailed = Signal(str)          # the text did not trace (e.g. empty): one line
    textChanged = Signal(str)            # the text was set (by the user or programmatically)
    provenanceRequested = Signal(str, object)   # where does trace value name[index] come from?
    # the active interventions, their trace (in, or dropped for a new clean trace), or whether
    # the stepper shows it changed
    interventionsChanged = Signal()
    shownTraceChanged = Signal()         # the stage views draw another trace (clean <-> intervened)
    interventionFailed = Signal(str)     # the intervened pass did not run: one line
    inline_work = False                  # views compute in workers (a snapshot for export: inline)

    def __init__(self, parent: Optional[QObject] = None, debounce_ms: int = TEXT_DEBOUNCE_MS) -> None:
        super().__init__(parent)
        self.workers = WorkerPool()
        self._model: Optional[Model] = None
        self._model_path: Optional[str] = None
        self._trace: Optional[Trace] = None
        self._text = DEFAULT_TEXT
        self._layer = 0
        self._head = 0
        self._selected = -1               # none yet: the first ordinary token once traced
        self._stage = stages.STAGES[0].key
        self._temperature = 1.0
        self.compute_seconds = 0.0
        self._labels: list[str] = []
        self._requests = 0                # every load or compute request takes the next number
        self._latest_load = -1
        self._latest_compute = -1
        self._computing = False
        self._compute_again = False
        self._loading_path: Optional[str] = None
        self._preparing: set[tuple[int, int]] = set()   # (id(trace), layer) being computed
        self._interventions: tuple = ()
        self._intervention: Optional[InterventionResult] = None   # for the current clean trace
        self._latest_intervention = -1
        self._show_intervened = False
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(debounce_ms)
        self._debounce.timeout.connect(self.compute_now)
        from .generation import GenerationControl

        self.generation = GenerationControl(self)   # generate / undo / the user's token (decoders)

    # -- read-only state ---------------------------------------------------------------
    @property
    def model(self) -> Optional[Model]:
        return self._model

    @property
    def model_path(self) -> Optional[str]:
        return self._model_path

    @property
    def trace(self) -> Optional[Trace]:
        return self._trace

    @property
    def text(self) -> str:
        return self._text

    @property
    def shown_trace(self) -> Optional[Trace]:
        """What the stepper's stage views draw: the intervened trace while the user shows it
        (and it is in), else the clean one."""
        return self._intervention.trace if self.showing_intervened else self.trace

    @property
    def layer(self) -> int:
        return self._layer

    @property
    def head(self) -> int:
        return self._head

    @property
    def selected_token(self) -> int:
        return self._selected

    @property
    def stage_key(self) -> str:
        return self._stage

    @property
    def temperature(self) -> float:
        return self._temperature

    @property
    def busy(self) -> bool:
        return self._loading_path is not None or self._computing

    def token_labels(self) -> list[str]:
        """How each token of the current trace reads on an axis (GPT-2's 'Ġ' shown as a space)."""
        return self._labels

    def available_stages(self) -> list[stages.Stage]:
        return stages.available_stages(self._model.config if self._model else None)

    # -- model -------------------------------------------------------------------------
    def open_model(self, path: Optional[str]) -> None:
        """Open a folder or file (None: the built-in model) in a worker; the old model, text and
        stage stay until the new one has opened, and stay for good if it fails."""
        self._requests += 1
        self._latest_load = self._requests
        self._loading_path = path or "the built-in model"
        self.busyChanged.emit(True, f"Opening {self._loading_path}…")
        self.workers.start(Task(self._requests, load_and_trace, path, self._text, self._layer),
                           self._on_loaded, self._on_load_failed)

    def _on_loaded(self, request_id: int, result: LoadResult) -> None:
        if request_id != self._latest_load:
            return
        self._loading_path = None
        self._model, self._model_path = result.model, result.path
        config = result.model.config
        self._layer = min(self._layer, config.n_layer - 1)
        self._head = min(self._head, config.n_head - 1)
        if not stages.stage(self._stage).available(config):
            self._stage = stages.available_stages(config)[-1].key
        self._latest_compute = self._requests     # any compute for the old model is stale now
        self._interventions, self._intervention, self._show_intervened = (), None, False
        self._latest_intervention = -1            # the old model's heads and rows mean nothing now
        self.interventionsChanged.emit()
        self.modelChanged.emit()
        self.layerChanged.emit(self._layer)
        self.headChanged.emit(self._head)
        self.stageChanged.emit(self._stage)
        if result.text == self._text and result.trace is not None:
            self._accept_trace(result.trace, result.seconds)
        else:
            self._trace, self._labels = None, []
            self.traceChanged.emit()
            if result.text == self._text:
                self.computeFailed.emit(result.trace_error or "the text did not trace")
            else:                      # typed on while the model opened
                self.compute_now()
        self._emit_busy()

    def _on_load_failed(self, request_id: int, message: str, user_error: bool) -> None:
        if request_id != self._latest_load:
            return
        self._loading_path = None
        self._emit_busy()
        self.openFailed.emit(message)

    # -- text and trace ----------------------------------------------------------------
    def set_text(self, text: str, immediate: bool = False) -> None:
        """Typing lands here: the model re-runs after a short pause (or at once)."""
        if text != self._text:
            self._text = text
            self.textChanged.emit(text)
        if immediate:
            self._debounce.stop()
            self.compute_now()
        else:
            self._debounce.start()

    def compute_now(self) -> None:
        if self._model is None:
            return
        if self._computing:            # one forward pass at a time; the latest text runs next
            self._compute_again = True
            return
        self._requests += 1
        self._latest_compute = self._requests
        self._computing = True
        self._emit_busy()
        self.workers.start(Task(self._requests, compute_trace, self._model, self._text, self._layer),
                           self._on_computed, self._on_compute_failed)

    def _compute_done(self) -> None:
        self._computing = False
        if self._compute_again:
            self._compute_again = False
            self.compute_now()
        else:
            self._emit_busy()

    def _on_computed(self, request_id: int, result: ComputeResult) -> None:
        if (request_id == self._latest_compute and result.model is self._model
                and result.text == self._text):
            self._accept_trace(result.trace, result.seconds)
        self._compute_done()

    def _on_compute_failed(self, request_id: int, message: str, user_error: bool) -> None:
        if request_id == self._latest_compute:
            if user_error:
                self.computeFailed.emit(message)
            else:
                self.openFailed.emit(f"computing the trace failed: {message}")
        self._compute_done()

    def next_request(self) -> int:
        """A number for a worker request: every load, compute or generation step takes the next."""
        self._requests += 1
        return self._requests

    def show_trace(self, trace: Trace, seconds: float) -> None:
        """Show a trace made from the current one (a generation step, or one undone): its text
        becomes the text, without tracing it again (its pieces need not re-tokenize alike)."""
        self._debounce.stop()
        self._latest_compute = self.next_request()          # a compute in flight is stale now
        self._text = trace.text
        self._accept_trace(trace, seconds)
        self.textChanged.emit(trace.text)

    def _accept_trace(self, trace: Trace, seconds: float) -> None:
        self._trace = trace            # the previous trace is released here (views keep no reference)
        self._intervention = None      # it compared the previous trace
        self._preparing.clear()
        self.compute_seconds = seconds
        self._labels = analysis.token_labels(trace, self._model.tokenizer)
        if self._selected >= trace.n_seq or self._selected < 0:
            self._selected = analysis.default_token(trace)
        self._layer = min(self._layer, trace.config.n_layer - 1)
        self.prepare_layer(self._layer)
        self.traceChanged.emit()
        self.prepare_layer(self._layer + 1)          # the next layer, while the user reads
        if self._interventions:
            self._run_interventions()
            self.interventionsChanged.emit()

    def _emit_busy(self) -> None:
        if self._loading_path is not None:
            self.busyChanged.emit(True, f"Opening {self._loading_path}…")
        elif self._computing:
            self.busyChanged.emit(True, "Computing…")
        else:
            self.busyChanged.emit(False, "")

    # -- what the user looks at --------------------------------------------------------
    def set_layer(self, layer: int) -> None:
        if self._model is None:
            return
        layer = int(np.clip(layer, 0, self._model.config.n_layer - 1))
        if layer != self._layer:
            self._layer = layer
            self.prepare_layer(layer)
            self.layerChanged.emit(layer)
            self.prepare_layer(layer + 1)

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
        self._requests += 1
        self.workers.start(Task(self._requests, prepare_layer, trace, layer),
                           lambda _, result: self._on_layer_prepared(key, result),
                           lambda _, message, user_error: self._on_layer_failed(key, message))

    def _on_layer_prepared(self, key: tuple[int, int], result) -> None:
        self._preparing.discard(key)
        trace, layer = result
        if trace is self._trace or trace is self.shown_trace:
            self.layerReady.emit(layer)

    def _on_layer_failed(self, key: tuple[int, int], message: str) -> None:
        self._preparing.discard(key)
        self.computeFailed.emit(f"computing layer {key[1]} failed: {message}")

    def trace_memory(self) -> int:
        """Bytes the current trace holds (residual stream, cached layer detail)."""
        return 0 if self._trace is None else self._trace.nbytes()

    def set_head(self, head: int) -> None:
        if self._model is None:
            return
        head = int(np.clip(head, 0, self._model.config.n_head - 1))
        if head != self._head:
            self._head = head
            self.headChanged.emit(head)

    def select_token(self, index: int) -> None:
        if self._trace is None or not 0 <= index < self._trace.n_seq:
            return
        if index != self._selected:
            self._selected = int(index)
            self.selectionChanged.emit(self._selected)

    def set_stage(self, key: str) -> None:
        stage = stages.stage(key)
        if not stage.available(self._model.config if self._model else None):
            return
        if key != self._stage:
            self._stage = key
            self.stageChanged.emit(key)

    def step(self, direction: int) -> bool:
        """One stage forward (+1) or back (-1); past a layer's last stage into the next layer."""
        if self._model is None:
            return False
        target = stages.step(self._stage, self._layer, direction, self._model.config)
        if target is None:
            return False
        key, layer = target
        self.set_layer(layer)
        self.set_stage(key)
        return True

    def set_temperature(self, temperature: float) -> None:
        temperature = float(max(temperature, 1e-3))
        if temperature != self._temperature:
            self._temperature = temperature
            self.temperatureChanged.emit(temperature)

    # -- interventions --------------------------------------------------------------------
    @property
    def interventions(self) -> tuple:
        """The active interventions (core/interventions.py); () for none."""
        return self._interventions

    @property
    def intervention(self) -> Optional[InterventionResult]:
        """The intervened trace of the current clean trace and the differences at every stage;
        None while it runs, or without interventions."""
        return self._intervention

    @property
    def intervened_trace(self) -> Optional[Trace]:
        return None if self._intervention is None else self._intervention.trace

    @property
    def show_intervened(self) -> bool:
        """The user asked the stepper to show the intervened pass (off without interventions)."""
        return self._show_intervened

    @property
    def showing_intervened(self) -> bool:
        """... and it is there to show (not while it runs for a new text)."""
        return self._show_intervened and self._intervention is not None

    def set_interventions(self, interventions) -> None:
        """Change the interventions: the intervened pass runs in a worker; none turns showing
        it off."""
        interventions = tuple(interventions)
        if interventions == self._interventions:
            return
        was_showing = self._show_intervened
        self._interventions, self._intervention = interventions, None
        self._latest_intervention = -1                  # a pass under way is stale now
        if not interventions:
            self._show_intervened = False
        self._run_interventions()
        self.interventionsChanged.emit()
        self._shown_changed(was_showing)

    def set_show_intervened(self, on: bool) -> None:
        on = bool(on) and bool(self._interventions)
        if on != self._show_intervened:
            was_showing = self._show_intervened
            self._show_intervened = on
            self.interventionsChanged.emit()
            self._shown_changed(was_showing)

    @property
    def waiting_for_intervened(self) -> bool:
        """Showing the intervened pass was asked for, and it is still running (the stage views
        say so rather than draw the clean model)."""
        return self._show_intervened and self._intervention is None

    def _shown_changed(self, was_showing: bool) -> None:
        if was_showing or self._show_intervened:
            self.shownTraceChanged.emit()

    def _run_interventions(self) -> None:
        if not self._interventions or self._trace is None or self._model is None:
            return
        self._latest_intervention = self.next_request()
        self.workers.start(Task(self._latest_intervention, run_interventions, self._model, self._trace,
                                self._interventions),
                           self._on_intervened, self._on_intervention_failed)

    def _on_intervened(self, request_id: int, result: InterventionResult) -> None:
        if (request_id != self._latest_intervention or result.clean is not self._trace
                or result.interventions != self._interventions):
            return
        was_showing = self._show_intervened
        self._intervention = result
        self.interventionsChanged.emit()
        self._shown_changed(was_showing)

    def _on_intervention_failed(self, request_id: int, message: str, user_error: bool) -> None:
        if request_id == self._latest_intervention:
            self.interventionFailed.emit(message)

    # -- provenance ----------------------------------------------------------------------
    def request_provenance(self, name: str, index) -> None:
        """Ask for the arithmetic behind the current trace's value name[index] (an Alt-click
        on a plot); the provenance panel answers (ui/provenance_panel.py)."""
        if self._trace is not None:
            self.provenanceRequested.emit(name, tuple(int(k) for k in index))

    # -- shutdown ----------------------------------------------------------------------
    def shutdown(self, msecs: int = -1) -> bool:
        """Drop every pending result and wait for the workers (teardown, window close)."""
        self._debounce.stop()
        self._latest_load = self._latest_compute = self._latest_intervention = -1
        self._compute_again = False
        return self.workers.wait(msecs)
