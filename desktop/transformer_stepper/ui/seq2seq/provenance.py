"""Alt-click (or Ctrl-click) a value anywhere in the translation window — a cross-attention
weight or score, q, a head output, any stage of either stack, a decoder hidden value — and the
main window's provenance panel (ui/interventions/provenance_panel.py) shows its arithmetic with Copy as
Python. The window's two view states are remade with every trace, so a relay stands in for
"the session" the panel follows: it forwards each side's request with that side's stand-in
model and trace, and a new trace re-explains the same address on the same side."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QDockWidget, QMainWindow

from ..interventions.provenance_panel import ProvenancePanel, provenance_dock


class ProvenanceRelay(QObject):
    provenanceRequested = Signal(str, object)
    traceChanged = Signal()
    shownTraceChanged = Signal()

    def __init__(self, parent: Optional[QObject] = None) -> None:
        super().__init__(parent)
        self.side = "Decoder"
        self.states: dict = {}

    @property
    def model(self):
        state = self.states.get(self.side)
        return None if state is None else state.model

    # while the window shows A − B: B's side (the panel explains a difference in both models)
    against = property(lambda self: getattr(self.states.get(self.side), "against", None))
    against_model = property(lambda self: getattr(self.states.get(self.side), "against_model", None))
    against_name = property(lambda self: getattr(self.states.get(self.side), "against_name", ""))
    pair_names = property(lambda self: getattr(self.states.get(self.side), "pair_names", None))

    @property
    def shown_trace(self):
        state = self.states.get(self.side)
        return None if state is None else state.trace

    def set_states(self, states: dict) -> None:
        """The window's new view states (a new trace): each side's requests come here."""
        self.states = states
        for side, state in states.items():
            state.provenanceRequested.connect(self._from_encoder if side == "Encoder" else self._from_decoder)
        self.traceChanged.emit()

    def _from_encoder(self, name: str, index) -> None:
        self.request("Encoder", name, index)

    def _from_decoder(self, name: str, index) -> None:
        self.request("Decoder", name, index)

    def request(self, side: str, name: str, index) -> None:
        self.side = side
        self.provenanceRequested.emit(name, tuple(int(k) for k in index))


def install(window: QMainWindow, relay: ProvenanceRelay) -> tuple[QDockWidget, ProvenancePanel]:
    """The main window's provenance panel in a dock of the translation window."""
    return provenance_dock(window, relay)
