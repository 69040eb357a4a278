"""What the Compare view compares, and the logic of its requests, without Qt.

CompareModel owns the sentences, the word, the tokens picked by hand and a cache of traces
(one per sentence text, for the current model). It reads the model and layer from the app's
session (any object with `model` and `layer`) and never writes to it: the stepper's text, model
and stage are untouched; whoever binds it to the session calls `on_model()` and `on_layer()`
when those change (ui/compare/state.py).

An edit re-runs after a short pause (a scheduler timer), in a worker: only the sentences whose
text is not in the cache are traced; then the comparison (cosines, maps, nearest words) is
combined from every sentence's hidden states, and the attention rows of the current layer are
read. A layer change with nothing else changed only reads the attention rows again. One task
runs at a time; a result that is no longer the latest request is dropped.

It notifies resultChanged(bool: the comparison itself changed), messageChanged(str: about the
input as a whole, "" when all is well), busyChanged(bool) and failed(str: one line)."""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from ..core.analysis.compare import (
    MAX_SENTENCES,
    Comparison,
    attention_rows,
    combine,
    sentences_of)
from ..core.trace.model import Model
from ..core.trace.trace import Trace
from ..core.analysis.labels import token_labels
from .events import Events
from .requests import Latest, Requests
from .scheduler import Job, Scheduler

TEXT_DEBOUNCE_MS = 30          # a pause this long in typing recomputes
TRACE_CACHE = 24              # traces kept: the sentences shown and a few recent edits


@dataclass(frozen=True)
class Request:
    number: int
    model: Model
    texts: tuple[str, ...]
    word: str
    positions: tuple[tuple[int, int], ...]      # (sentence index, token) picked by hand
    layer: int
    traces: Mapping[str, Trace]                 # already traced (read-only, shared)
    previous: Optional[Comparison]              # the same inputs' comparison, to reuse

    @property
    def key(self) -> tuple:
        return (id(self.model), self.texts, self.word, self.positions)


@dataclass(frozen=True)
class Result:
    request: Request
    comparison: Comparison
    attention: list[np.ndarray]                 # per occurrence [n_head, n_seq]
    labels: list[list[str]]                     # per sentence, its token labels
    seconds: float                              # worker time
    traced: int                                 # sentences traced for this result


def run_request(request: Request) -> Result:
    """Worker side: trace what is missing, combine, read the layer's attention rows."""
    start = time.perf_counter()
    traced = 0
    comparison = request.previous
    if comparison is None:
        traced = sum(1 for text in request.texts if text not in request.traces)
        sentences = sentences_of(request.model, request.texts, request.word,
                                 dict(request.positions), request.traces)
        comparison = combine(sentences, request.word)
    attention = attention_rows(comparison, request.layer) if comparison.occurrences else []
    labels = [token_labels(s.trace, request.model.tokenizer) if s.trace is not None else []
              for s in comparison.sentences]
    return Result(request, comparison, attention, labels, time.perf_counter() - start, traced)


class CompareModel:
    def __init__(self, session, scheduler: Scheduler, debounce_ms: int = TEXT_DEBOUNCE_MS,
                 **rest) -> None:
        super().__init__(**rest)             # cooperative: a QObject adapter's parent
        self.events = Events()
        self.session = session
        self.workers = scheduler
        self.lines: list[str] = []                      # as typed, empty ones included
        self.word = ""
        self._picks: dict[int, tuple[str, int]] = {}    # sentence index -> (its text, token)
        self._traces: OrderedDict[str, Trace] = OrderedDict()
        self._traces_model: Optional[Model] = None
        self.result: Optional[Result] = None
        self.message = ""
        self.active = False
        self._dirty = False
        self._latest = Latest(Requests())
        self._computing = False
        self._again = False
        self._debounce = scheduler.timer(debounce_ms, self.compute_now)

    def _notify(self, name: str, *args) -> None:
        self.events.notify(name, *args)

    # -- what is compared ------------------------------------------------------------------
    @property
    def comparison(self) -> Optional[Comparison]:
        return self.result.comparison if self.result is not None else None

    def texts(self) -> list[str]:
        """The sentences compared: the non-empty lines, at most MAX_SENTENCES."""
        return [line.strip() for line in self.lines if line.strip()][:MAX_SENTENCES]

    def positions(self) -> dict[int, int]:
        texts = self.texts()
        return {i: position for i, (text, position) in self._picks.items()
                if i < len(texts) and texts[i] == text}

    def set_lines(self, lines: Sequence[str], immediate: bool = False) -> None:
        self.lines = list(lines)
        self._schedule(immediate)

    def set_word(self, word: str, immediate: bool = False) -> None:
        """A new word: every sentence compares its first occurrence again."""
        if word.strip() != self.word:
            self.word = word.strip()
            self._picks.clear()
        self._schedule(immediate)

    def load(self, word: str, lines: Sequence[str]) -> None:
        """A preset: word and sentences at once, computed at once."""
        self.word = word.strip()
        self._picks.clear()
        self.lines = list(lines)
        self._schedule(immediate=True)

    def pick(self, sentence: int, position: int) -> None:
        """Compare token `position` of sentence `sentence` (0-based among the compared)."""
        texts = self.texts()
        if 0 <= sentence < len(texts):
            self._picks[sentence] = (texts[sentence], int(position))
            self._schedule(immediate=True)

    def set_active(self, active: bool) -> None:
        """Work only while the view is shown; what changed meanwhile is computed on showing."""
        self.active = active
        if active and self._dirty:
            self.compute_now()

    # -- computing ---------------------------------------------------------------------------
    def _schedule(self, immediate: bool) -> None:
        self._update_message()
        if immediate:
            self._debounce.stop()
            self.compute_now()
        else:
            self._debounce.start()

    def _update_message(self) -> None:
        count = sum(1 for line in self.lines if line.strip())
        if self.session.model is None:
            message = "Open a model to compare."
        elif count > MAX_SENTENCES:
            message = (f"{count} sentences: Compare takes at most {MAX_SENTENCES}; "
                       f"the first {MAX_SENTENCES} are compared.")
        elif count == 0:
            message = "Type two or more sentences, one per line, or load a preset."
        elif count == 1:
            message = "One sentence: add another line to compare."
        else:
            message = ""
        if message != self.message:
            self.message = message
            self._notify("messageChanged", message)

    def compute_now(self) -> None:
        model = self.session.model
        if not self.active or model is None:
            self._dirty = True
            self._update_message()
            return
        if self._computing:                       # one at a time; the latest runs next
            self._again = True
            return
        self._dirty = False
        texts = tuple(self.texts())
        if not texts:
            self.result = None
            self._notify("resultChanged", True)
            return
        if self._traces_model is not model:
            self._traces.clear()
            self._traces_model = model
        number = self._latest.new()
        positions = tuple(sorted(self.positions().items()))
        previous = None
        if self.result is not None:
            old = self.result.request
            if (old.model is model and old.texts == texts and old.word == self.word
                    and old.positions == positions):
                previous = self.result.comparison
        request = Request(number, model, texts, self.word, positions,
                          self.session.layer, dict(self._traces), previous)
        self._computing = True
        self._notify("busyChanged", True)
        self.workers.start(Job(request.number, run_request, (request,)), self._on_done, self._on_failed)

    def _finish(self) -> None:
        self._computing = False
        if self._again:
            self._again = False
            self.compute_now()
        else:
            self._notify("busyChanged", False)

    def _on_done(self, number: int, result: Result) -> None:
        request = result.request
        current = (self._latest.is_latest(number) and request.model is self.session.model
                   and request.texts == tuple(self.texts()) and request.word == self.word)
        if request.model is self._traces_model:
            for sentence in result.comparison.sentences:
                if sentence.trace is not None:
                    self._traces[sentence.text] = sentence.trace
                    self._traces.move_to_end(sentence.text)
            while len(self._traces) > TRACE_CACHE:
                self._traces.popitem(last=False)
        if current:
            changed = self.result is None or result.comparison is not self.result.comparison
            self.result = result
            self._notify("resultChanged", changed)
        self._finish()

    def _on_failed(self, number: int, message: str, user_error: bool) -> None:
        if self._latest.is_latest(number):
            self._notify("failed", message if user_error else f"comparing failed: {message}")
        self._finish()

    # -- the app's session (its binder calls these) ------------------------------------------
    def on_model(self) -> None:
        self._traces.clear()
        self._traces_model = None
        self._picks.clear()          # positions of another tokenizer mean nothing here
        self.result = None
        self._schedule(immediate=True)

    def on_layer(self, _layer: int) -> None:
        if self.result is not None:
            self._schedule(immediate=True)

    def shutdown(self, msecs: int = -1) -> bool:
        self._debounce.stop()
        self._latest.drop()
        self._again = False
        return self.workers.wait(msecs)
