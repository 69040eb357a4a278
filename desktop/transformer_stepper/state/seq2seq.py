"""The encoder–decoder window's model, trace and requests, without Qt.

TranslationModel owns the source and target texts, the model opened, the trace shown and the
layer whose detail is prepared. Opening, tracing, stepping, translating, appending a chosen token
and preparing a layer each run in a worker (state/seq2seq_work.py); a result that is no longer
the latest request (the user typed on, opened another model) is dropped when it lands. An edit
of the source or target re-traces after a short pause (a scheduler timer); Translate after an
edit translates the source as it is now. The Interventions page's passes are requests of the
same window, numbered with the others (`intervening`: state/seq2seq_interventions.py).

The window tells it what the user typed (`edit_source`, `edit_target`, or `set_texts` when the
boxes were set by code) and shows what it notifies: traced(bool: a new model, str or None: the
target text to show), targetChanged(str: the target box's text, set by the model) and
failed(str: one line, only for the latest request)."""
from __future__ import annotations

from typing import Callable, Optional

from .events import Events
from .requests import Latest, Requests
from .scheduler import Job, Scheduler
from .seq2seq_interventions import TranslationInterventions
from . import seq2seq_work as work

EDIT_DEBOUNCE_MS = 200          # a pause this long in typing re-traces
STEPS_TO_END = 64               # Translate: at most this many target tokens


def summary(model, trace) -> str:
    """The status line of a trace: its notices, else what was computed."""
    return (" ".join(trace.notices) or f"{model.name}: {trace.encoder.n_seq} source tokens, "
            f"encoded once; {trace.decoder.n_seq} decoder positions "
            f"({trace.decoder.computed_rows} computed by this pass)")


class TranslationModel:
    def __init__(self, scheduler: Scheduler, source: str = "", debounce_ms: int = EDIT_DEBOUNCE_MS,
                 **rest) -> None:
        super().__init__(**rest)             # cooperative: a QObject adapter's parent
        self.events = Events()
        self.workers = scheduler
        self.source, self.target = source, ""
        self.model = self.trace = None
        self.path: Optional[str] = None              # the folder of the model open
        self.layer = 0
        self.traced_source: Optional[str] = None     # the source text of the trace shown
        self.target_generated = False                # the target holds the model's words
        self.translate_when_open = False             # a walk's step: translate once open
        self.requests = Requests()                   # numbers this window's every request
        self._latest = Latest(self.requests)
        self.intervening = TranslationInterventions(self)    # the Interventions page's requests
        self._running_source: Optional[str] = None   # the source of the latest request's trace
        self._opening: Optional[str] = None          # the path being opened
        self._debounce = scheduler.timer(debounce_ms, self.retrace)

    def _notify(self, name: str, *args) -> None:
        self.events.notify(name, *args)

    # -- what the user typed ---------------------------------------------------------------
    def set_texts(self, source: str, target: str) -> None:
        """The boxes' texts (set by code, not typed): nothing runs."""
        self.source, self.target = source, target

    def edit_source(self, text: str) -> None:
        """The user typed in the source: the model's translation of the old source goes (a
        target the user typed stays); a re-trace after the pause."""
        self.source = text
        if self.target_generated:
            self._set_target("")
            self.target_generated = False
        self._debounce.start()

    def edit_target(self, text: str) -> None:
        """The user typed in the target: teacher-forced, re-traced after the pause."""
        self.target = text
        self.target_generated = False
        self._debounce.start()

    def _set_target(self, text: str) -> None:
        self.target = text
        self._notify("targetChanged", text)

    @property
    def edit_pending(self) -> bool:
        return self._debounce.isActive()

    # -- requests ----------------------------------------------------------------------------
    def _run(self, function: Callable, *args, source: Optional[str] = None) -> int:
        """Start `function(*args)` as the latest request; `source`: the source text it traces
        afresh (None: it extends the trace shown)."""
        self._running_source = self.traced_source if source is None else source
        number = self._latest.new()
        self.workers.start(Job(number, function, args), self._on_done, self._on_failed)
        return number

    def open_model(self, path: Optional[str]) -> None:
        self._debounce.stop()
        self._opening = path
        self._run(work.open_and_trace, path, self.source, self.target, source=self.source)

    def retrace(self) -> None:
        if self.model is not None:
            self._run(work.trace, self.model, self.source, self.target, self.layer, source=self.source)

    def retrace_then_translate(self) -> None:
        """Trace the source afresh (the target emptied), then translate it step by step."""
        if self.model is not None:
            self._debounce.stop()
            self._run(work.translate, self.model, self.source, "", self.layer, source=self.source)

    def next_token(self) -> None:
        if self.trace is not None:
            self._run(work.steps, self.model, self.trace, 1, self.layer)

    def append_token(self, token_id: int) -> None:
        if self.trace is not None:
            self._run(work.append, self.model, self.trace, int(token_id), self.layer)

    def translate(self) -> None:
        """To the end of the sentence: of the source as it is now, traced afresh if it changed."""
        if self.trace is None:
            return
        if self.source != self.traced_source or self._debounce.isActive():
            self._debounce.stop()
            if self.target_generated:
                self._set_target("")
            self._run(work.translate, self.model, self.source, self.target, self.layer,
                      source=self.source)
            return
        self._run(work.steps, self.model, self.trace, STEPS_TO_END, self.layer)

    def set_layer(self, layer: int) -> None:
        """The layer shown: its detail prepared in a worker."""
        self.layer = layer
        if self.trace is not None:
            self._run(work.prepared, self.model, self.trace, layer)

    def _on_done(self, number: int, result) -> None:
        if not self._latest.is_latest(number):       # a later request is under way: it wins
            return
        model, trace, target_text = result
        new_model = model is not self.model
        if new_model:
            self.path = self._opening
        self.model, self.trace = model, trace
        self.traced_source = self._running_source
        if target_text is not None:
            self.target = target_text
            self.target_generated = True
        self._notify("traced", new_model, target_text)
        if new_model and self.translate_when_open:
            self.translate_when_open = False
            self.translate()

    def _on_failed(self, number: int, message: str, user_error: bool) -> None:
        if self._latest.is_latest(number):
            self._notify("failed", " ".join(message.split()))       # one line

    def shutdown(self, msecs: int = -1) -> bool:
        """No more results wanted: the pause's re-trace stopped, what runs dropped, waited for."""
        self._debounce.stop()
        self._latest.drop()
        self.intervening.drop()
        return self.workers.wait(msecs)
