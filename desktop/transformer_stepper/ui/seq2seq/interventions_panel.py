"""The translation window's Interventions page: ablate a head of the encoder's self-attention,
the decoder's or the cross-attention, or remove the source's positions; then the difference at
every stage of both stacks (the main window's difference map, one per stack, Cross-attention a
row of the decoder's) and the two translations, clean and intervened. The intervened pass, the
differences and the translations are computed in the window's worker (core/analysis/seq2seq_differences.py);
a click on a cell opens that stage, layer and head in the window. What is intervened and the
requests are state/seq2seq_interventions.py's, tested without Qt
(tests/state/test_seq2seq_requests.py); this page shows them."""
from __future__ import annotations

from typing import Callable, Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QSpinBox,
                               QVBoxLayout, QWidget)

from ...core.model.interventions import AblateHead
from ...core.model.seq2seq_interventions import (
    InStack,
    STACK_NAMES,
    describe_all)
from ...core.model.seq2seq_stages import seq2seq_stages
from ..interventions.difference_map import DifferenceMap

ATTENTIONS = (("cross", "cross-attention"), ("encoder", "encoder self-attention"),
              ("decoder", "decoder self-attention"))


class InterventionsPanel(QWidget):
    def __init__(self, window, open_cell: Callable[[str, str, Optional[int], Optional[int]], None],
                 parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.window = window                 # the TranslationWindow: its model, trace, workers
        self._open_cell = open_cell
        self.intervening = window.translation.intervening     # what is intervened, its requests
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 2)
        row = QHBoxLayout()
        self.attention = QComboBox()
        for key, label in ATTENTIONS:
            self.attention.addItem(label, key)
        self.layer, self.head = QSpinBox(), QSpinBox()
        self.ablate = QPushButton("Ablate head")
        self.ablate.setToolTip("Zero this head's output before its output projection (as a hook on o_proj)")
        self.no_positions = QCheckBox("Remove the source's positions")
        self.no_positions.setToolTip("The encoder reads the source with no position vectors "
                                     "(T5: no relative position bias)")
        self.clear = QPushButton("Clear")
        self.in_stages = QCheckBox("Stages show it")
        self.in_stages.setToolTip("Every stage of both stacks draws the intervened pass (its numbers, "
                                  "its provenance); off: the clean one")
        for label, widget in (("", self.attention), ("layer", self.layer), ("head", self.head),
                              ("", self.ablate), ("", self.no_positions), ("", self.clear),
                              ("", self.in_stages)):
            if label:
                row.addWidget(QLabel(label))
            row.addWidget(widget)
        row.addStretch(1)
        outer.addLayout(row)
        self.chips = QLabel("No intervention: ablate a head or remove the source's positions.")
        self.chips.setWordWrap(True)
        outer.addWidget(self.chips)
        self.translation = QLabel("")
        self.translation.setWordWrap(True)
        self.translation.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.translation)
        maps = QHBoxLayout()
        self.maps = {side: DifferenceMap(self._opener(side), name=side) for side in ("Encoder", "Decoder")}
        for side_map in self.maps.values():
            maps.addWidget(side_map, 1)
        outer.addLayout(maps, 1)
        self.ablate.clicked.connect(self._ablate_clicked)
        self.no_positions.toggled.connect(self.intervening.set_no_positions)
        events = self.intervening.events
        events.changed.connect(self._show_chips)
        events.computing.connect(self._computing)
        events.done.connect(self._done)
        events.cleared.connect(self._cleared)
        events.failed.connect(self._failed)
        self.clear.clicked.connect(self.clear_all)
        self.in_stages.toggled.connect(lambda _on: self.window.shown_changed())
        self.attention.currentIndexChanged.connect(self._fit)

    def _opener(self, side: str):
        def open_cell(key: str, layer: Optional[int], head: Optional[int]) -> None:
            self._open_cell(side, key, layer, head)
        return open_cell

    # -- what is intervened ------------------------------------------------------------------
    heads = property(lambda self: self.intervening.heads)
    result = property(lambda self: self.intervening.result)    # (intervened trace, differences, translations)

    def shown_in_stages(self):
        """The intervened Seq2SeqTrace the stages should draw, or None (the clean one)."""
        current = self.intervening.current
        if not self.in_stages.isChecked() or current is None:
            return None
        return current[0]

    def interventions(self) -> tuple:
        return self.intervening.interventions()

    def add_head(self, stack: Optional[str] = None, layer: Optional[int] = None, head: Optional[int] = None) -> None:
        self.intervening.add_head(InStack(stack or self.attention.currentData(),
                                          AblateHead(self.layer.value() if layer is None else layer,
                                                     self.head.value() if head is None else head)))

    def _ablate_clicked(self) -> None:
        self.add_head()

    def clear_all(self) -> None:
        self.no_positions.blockSignals(True)
        self.no_positions.setChecked(False)
        self.no_positions.blockSignals(False)
        self.intervening.clear()

    def _fit(self, *_) -> None:
        model = self.window.model
        if model is None:
            return
        config = model.config.encoder if self.attention.currentData() == "encoder" else model.config.decoder
        self.layer.setRange(0, config.n_layer - 1)
        self.head.setRange(0, config.n_head - 1)

    def _show_chips(self) -> None:
        items = self.interventions()
        self.chips.setText(describe_all(items) if items else
                           "No intervention: ablate a head or remove the source's positions.")

    # -- computing ---------------------------------------------------------------------------
    def trace_changed(self) -> None:
        """The window's clean trace changed: the result is stale; recompute when it shows."""
        self._fit()
        if self.intervening.trace_changed(self.isVisible()):
            self.redraw()                      # the same pass (a layer prepared): selection only

    def run(self) -> None:
        self.intervening.run()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.intervening.wanted()

    def _computing(self) -> None:
        self.translation.setText("computing the intervened pass …")

    def _failed(self, message: str) -> None:
        self.translation.setText(f"error: {message}")

    def _done(self) -> None:
        self.redraw()
        if self.in_stages.isChecked():
            self.window.shown_changed()

    def _cleared(self, shown: bool) -> None:
        self.translation.setText("")
        if shown and self.in_stages.isChecked():
            self.window.shown_changed()        # back to the clean pass

    def redraw(self) -> None:
        if self.result is None:
            return
        intervened, differences, translations = self.result
        model = self.window.model
        walk = seq2seq_stages(model.config)
        states = self.window.states
        for side, side_map in self.maps.items():
            trace = intervened.encoder if side == "Encoder" else intervened.decoder
            state = states.get(side)
            position = min(state.selected_token, trace.n_seq - 1) if state is not None else 0
            token = state.token_labels()[position] if state is not None else ""
            config = model.config.encoder if side == "Encoder" else model.config.decoder
            side_map.set_data(differences[side], config, position, token,
                              [s for section, s in walk if section == side])
        where = translations.first_difference
        self.translation.setText(
            f"Translation, clean: <b>{_escape(translations.clean_text) or '(empty)'}</b><br>"
            f"Translation, intervened: <b>{_escape(translations.intervened_text) or '(empty)'}</b> — "
            + ("the same." if where is None else f"they part at target token {where}."))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


__all__ = ["InterventionsPanel", "STACK_NAMES"]
