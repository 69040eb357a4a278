"""The Cross-attention stage of a decoder layer and head: q from the decoder stream, k and v
from the encoder's output (projected once per source and reused by every step), the scores, the
weights — the alignment, target × source — and the weighted sum. A click on the alignment
selects that target and that source token (linked with every other view of either side)."""
from __future__ import annotations

from typing import Optional

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from ...core.model.score_terms import score_terms
from ..plots import Heatmap


class CrossAttentionView(QWidget):
    targetSelected = Signal(int)
    sourceSelected = Signal(int)
    explainRequested = Signal(str, object)   # Alt-click: where does decoder value name[index] come from?

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 2)
        self.explanation = QLabel()
        self.explanation.setWordWrap(True)
        outer.addWidget(self.explanation)
        grid = QGridLayout()
        outer.addLayout(grid, 1)
        self.alignment = Heatmap("Alignment: cross-attention weights", "source token (key)",
                                 "target position (query)", signed=False, value_label="weight",
                                 row_names="target", col_names="source", click=None)
        self.q = Heatmap("q (decoder stream)", "dim", "target", row_names="target", col_names="dim")
        self.k = Heatmap("k (encoder output, computed once)", "dim", "source", row_names="source",
                         col_names="dim")
        self.v = Heatmap("v (encoder output, computed once)", "dim", "source", row_names="source",
                         col_names="dim")
        self.scores = Heatmap("Scores", "source token (key)", "target position (query)",
                              row_names="target", col_names="source", click=None)
        self.outputs = Heatmap("Weighted sum Σ w·v (head output)", "dim", "target",
                               row_names="target", col_names="dim")
        # the alignment gets the most room: it is what this stage is for
        for figure, row, col, rows, cols in ((self.alignment, 0, 0, 2, 2), (self.scores, 0, 2, 1, 1),
                                             (self.outputs, 1, 2, 1, 1), (self.q, 2, 0, 1, 1),
                                             (self.k, 2, 1, 1, 1), (self.v, 2, 2, 1, 1)):
            grid.addWidget(figure, row, col, rows, cols)
        for row, stretch in ((0, 2), (1, 2), (2, 2)):
            grid.setRowStretch(row, stretch)
        grid.setColumnStretch(0, 2)
        grid.setColumnStretch(1, 2)
        grid.setColumnStretch(2, 3)
        self.alignment.cellClicked.connect(self._alignment_clicked)
        self.scores.cellClicked.connect(self._scores_clicked)
        self.q.cellClicked.connect(lambda r, c: self._explain("cross_q", r, c))
        self.outputs.cellClicked.connect(lambda r, c: self._explain("cross_head_outputs", r, c))
        for figure, signal in ((self.q, self.targetSelected), (self.outputs, self.targetSelected),
                               (self.k, self.sourceSelected), (self.v, self.sourceSelected)):
            figure.tokenClicked.connect(signal.emit)
        self._target, self._source = 0, 0
        self._layer = self._head = 0

    def _alignment_clicked(self, row: int, col: int) -> None:
        if _explaining():
            self._explain("cross_attn_weights", row, col)
        else:
            self._cell_clicked(row, col)

    def _scores_clicked(self, row: int, col: int) -> None:
        if _explaining():
            self._explain("cross_scores", row, col)
        else:
            self._cell_clicked(row, col)

    def _explain(self, name: str, row: int, col: int) -> None:
        self.explainRequested.emit(name, (self._layer, self._head, row, col))

    def _cell_clicked(self, row: int, col: int) -> None:
        self.targetSelected.emit(row)
        self.sourceSelected.emit(col)

    def figures(self) -> list[Heatmap]:
        return [self.alignment, self.scores, self.q, self.k, self.v, self.outputs]

    def show_trace(self, trace, layer: int, head: int, source_labels, target_labels) -> None:
        """trace: a Seq2SeqTrace whose decoder `layer` detail is ready."""
        self._layer, self._head = layer, head
        detail = trace.decoder.detail(layer)
        weights = detail["cross_attn_weights"][head]
        self.scores.set_title(f"Scores {score_terms(trace.decoder, 'cross_').formula()}")
        self.alignment.set_data(weights, target_labels, source_labels, levels=(0.0, 1.0))
        self.scores.set_data(detail["cross_scores"][head], target_labels, source_labels)
        self.q.set_data(detail["cross_q"][head], target_labels)
        self.k.set_data(detail["cross_k"][head], source_labels)
        self.v.set_data(detail["cross_v"][head], source_labels)
        self.outputs.set_data(detail["cross_head_outputs"][head], target_labels)
        n_tgt, n_src = weights.shape
        d_head = detail["cross_q"].shape[-1]
        best = int(np.argmax(weights[min(self._target, n_tgt - 1)]))
        self.explanation.setText(
            f"Layer {layer}, head {head}: each of the {n_tgt} target positions asks with its q "
            f"[{n_tgt} × {d_head}] which of the {n_src} source tokens to read; k and v "
            f"[{n_src} × {d_head}] were projected from the encoder's output once, when the source "
            f"was encoded, and every decoding step reuses them (a step computes one new q row). "
            f"No causal mask: every target position sees the whole source. Target position "
            f"{self._target} puts its largest weight, {weights[min(self._target, n_tgt - 1), best]:.3f}, "
            f"on source token {best} ({source_labels[best]!r})." + _ablated(trace.decoder, layer, head))
        self.select(self._target, self._source)

    def select(self, target: Optional[int] = None, source: Optional[int] = None) -> None:
        self._target = self._target if target is None else target
        self._source = self._source if source is None else source
        self.alignment.set_highlight(self._target, self._source)
        self.scores.set_highlight(self._target, self._source)
        for figure, row in ((self.q, self._target), (self.outputs, self._target),
                            (self.k, self._source), (self.v, self._source)):
            figure.set_highlight(row, None)


def _ablated(decoder, layer: int, head: int) -> str:
    """A sentence when the trace shown is intervened and this head is ablated there."""
    from ...core.model.interventions import head_edits

    mode = head_edits(getattr(decoder, "cross_interventions", ()), layer)[0].get(head)
    return (f" This is the intervened pass: the head is ablated ({mode}), its output replaced "
            f"before the output projection; the weights are as computed." if mode else "")


def _explaining() -> bool:
    """Alt or Ctrl held: a click asks where the value comes from (as in every stage's plots)."""
    held = QGuiApplication.keyboardModifiers()
    return bool(held & (Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ControlModifier))
