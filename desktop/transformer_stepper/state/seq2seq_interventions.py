"""The translation window's interventions and their requests, without Qt: the heads ablated (in
the encoder's self-attention, the decoder's or the cross-attention) and whether the source's
positions are removed; the intervened pass, both stacks' differences and the two translations,
computed in the window's worker (state/seq2seq_work.py's intervene) as requests of the window's
TranslationModel, numbered with its own, so a result that is no longer the latest is dropped
when it lands.

The Interventions page (ui/seq2seq/interventions_panel.py) shows what it notifies: changed()
(the interventions changed: the list follows), computing() (a pass is under way), done() (a
result landed: draw it), cleared(bool: the stages were showing the result dropped) and
failed(str: one line, only for the latest request)."""
from __future__ import annotations

from ..core.model.seq2seq_interventions import InStack, NoSourcePositions
from .events import Events
from .requests import Latest
from .scheduler import Job
from . import seq2seq_work as work


class TranslationInterventions:
    def __init__(self, translation) -> None:
        """`translation`: the TranslationModel whose model and trace are intervened; its
        scheduler runs the passes and its requests number them."""
        self.events = Events()
        self.translation = translation
        self.heads: list[InStack] = []
        self.no_positions = False
        self.result = None           # (intervened trace, differences, translations)
        self.result_for = None       # the clean trace the result was computed from
        self._running = None         # (model, clean trace) of the latest request
        self._clean = None           # (model, source, (ids, text)): the clean translation known
        self._latest = Latest(translation.requests)

    def _notify(self, name: str, *args) -> None:
        self.events.notify(name, *args)

    # -- what is intervened ------------------------------------------------------------------
    def interventions(self) -> tuple:
        return tuple(self.heads) + ((NoSourcePositions(),) if self.no_positions else ())

    @property
    def current(self):
        """The result, when it is of the window's trace now (else None)."""
        if self.result is None or self.result_for is not self.translation.trace:
            return None
        return self.result

    def add_head(self, item: InStack) -> bool:
        """Ablate one more head; -> False when it already is."""
        if item in self.heads:
            return False
        self.heads.append(item)
        self._changed()
        return True

    def set_no_positions(self, on: bool) -> None:
        self.no_positions = bool(on)
        self._changed()

    def clear(self) -> None:
        self.heads.clear()
        self.no_positions = False
        self._changed()

    def _changed(self) -> None:
        self._notify("changed")
        self.run()

    # -- computing ---------------------------------------------------------------------------
    def run(self) -> None:
        """The intervened pass of the trace now, as the latest request; with no model, trace or
        intervention, the result goes (and what is in flight is dropped)."""
        model, trace = self.translation.model, self.translation.trace
        items = self.interventions()
        if model is None or trace is None or not items:
            self._latest.drop()
            shown = self.current is not None
            self.result = None
            self._notify("cleared", shown)
            return
        self._running = (model, trace)
        known = self._clean
        clean = known[2] if known is not None and known[0] is model and known[1] == trace.source_text else None
        self.translation.workers.start(Job(self._latest.new(), work.intervene, (model, trace, items, clean)),
                                       self._on_done, self._on_failed)
        self._notify("computing")

    def trace_changed(self, showing: bool) -> bool:
        """The window's clean trace changed. -> True when the result is of it still (a layer
        prepared: the same pass); else the result goes and, when `showing` (the page is on
        screen), is computed again."""
        if self.current is not None:
            return True
        self.result = None
        if self.interventions() and showing:
            self.run()
        return False

    def wanted(self) -> None:
        """The page came on screen: the result computed if there is none."""
        if self.result is None and self.interventions():
            self.run()

    def _on_done(self, number: int, result) -> None:
        if not self._latest.is_latest(number):
            return
        model, self.result_for = self._running
        self.result = result
        translations = result[2]
        self._clean = (model, self.result_for.source_text,
                       (translations.clean_ids, translations.clean_text))
        self._notify("done")

    def _on_failed(self, number: int, message: str, user_error: bool) -> None:
        if self._latest.is_latest(number):
            self._notify("failed", " ".join(message.split()))     # one line

    def drop(self) -> None:
        """No result wanted any more (the window closes)."""
        self._latest.drop()

