"""The Cross-attention stage while the translation window shows A − B: the cross-attention's
arrays in the window's translator minus the compared one's, at the layer and head shown
(core/analysis/seq2seq_stage_difference.py), drawn by the stage views' A − B panel
(ui/model_diff/stage_panel.py) with the source tokens on the keys' axis. Alt-click a difference:
its provenance in both models (the window's provenance panel)."""
from __future__ import annotations

from typing import Callable, Optional

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ...core.analysis.seq2seq_stage_difference import seq2seq_stage_difference
from ...core.model.errors import ModelError
from ..model_diff.stage_mode import CellExplainer
from ..model_diff.stage_panel import DifferencePanel


class CrossDifferenceView(QWidget):
    def __init__(self, explain: Callable[[str, tuple], None], select_target: Callable[[int], None],
                 parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self._explain, self._select_target = explain, select_target
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 2)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)
        self.panel = DifferencePanel(self._connect)
        layout.addWidget(self.panel, stretch=1)
        self.readout = QLabel("Hover a plot for exact values; Alt-click a difference: where it comes from, in both.")
        self.readout.setWordWrap(True)
        layout.addWidget(self.readout)
        self.shown = None

    def _connect(self, name: str, figure) -> None:
        key = name[len("difference_"):]
        figure.hovered.connect(self.readout.setText)
        figure.cellClicked.connect(CellExplainer(self, key))        # (held weakly: no cycle)
        if key not in ("cross_k", "cross_v"):          # their rows are source tokens
            figure.tokenClicked.connect(self._select_target)

    def explain_cell(self, key: str, row: int, col: int) -> None:
        name, index = self.panel.address(key, row, col)
        if name is None:
            self.readout.setText(f"A − B: {index[0]}.")
            return
        self._explain(name, index)

    def show_difference(self, trace_a, trace_b, layer: int, head: int, labels: list[str],
                        source_labels: list[str], tokenizer, names: tuple[str, str], selected: int) -> None:
        """A − B of the layer's and head's cross-attention (both traces' detail prepared)."""
        try:
            shown = seq2seq_stage_difference(trace_a, trace_b, "Decoder", "cross_attention", layer, head)
        except ModelError as exc:
            self.caption.setText(f"A − B: {exc}")
            self.panel.setVisible(False)
            return
        self.shown = shown
        self.caption.setText(f"<b>A − B</b> of decoder layer {layer}'s cross-attention, head {head}: "
                             f"{names[0]} (A) minus {names[1]} (B). k and v are each model's own encoder "
                             "output projected; the weights' columns are the source tokens.")
        self.panel.setVisible(True)
        self.panel.show_difference(shown, labels, tokenizer, names, selected, source_labels=source_labels)
        for _, figure in self.panel.figures():          # their colour bars (the window has no frame scheduler)
            figure.finish()
