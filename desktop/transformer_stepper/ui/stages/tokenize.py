"""1. Tokenize: text -> pieces, ids, special tokens, character offsets."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from ..plots import Bars
from ..plots.common import BAR_BRUSH, MUTED, SELECTED, Figure, nearest_index
from .base import StageView


class TokenSpans(Figure):
    """Each token as a bar over the characters of the text it came from (x: character offset,
    y: token); special tokens, which cover no characters, are thin grey marks."""

    def __init__(self) -> None:
        super().__init__("Which characters each token covers", "character of the text", "token")
        self.plot.invertY(True)
        self.spans = pg.BarGraphItem(x0=[], y=[], height=0.7, width=[], pen=None, brush=BAR_BRUSH)
        self.plot.addItem(self.spans)
        self.starts = np.zeros(0, dtype=np.int64)
        self.ends = np.zeros(0, dtype=np.int64)
        self.rows: list[str] = []
        self.text = ""
        self.special = np.zeros(0, dtype=bool)

    def set_data(self, text: str, offsets: np.ndarray, special: np.ndarray, rows: list[str],
                 selected: int) -> None:
        self.text, self.rows, self.special = text, rows, special
        self.starts = offsets[:, 0].astype(float).copy()
        self.ends = offsets[:, 1].astype(float).copy()
        # specials cover no characters: place them where they sit in the sequence
        for i in np.flatnonzero(special):
            self.starts[i] = self.ends[i - 1] if i > 0 else 0.0
            self.ends[i] = self.starts[i] + 0.3
        self.select(selected)
        self.x_axis.set_labels([c if c.strip() else "␣" for c in text])
        self.y_axis.set_labels(rows)
        self.plot.setRange(xRange=(-1, max(len(text), 1)), yRange=(-0.6, len(rows) - 0.4), padding=0)

    def select(self, selected: int) -> None:
        n = len(self.rows)
        brushes = [QColor(MUTED) if s else QColor(BAR_BRUSH) for s in self.special]
        if 0 <= selected < n:
            brushes[selected] = QColor(SELECTED)
        self.spans.setOpts(x0=self.starts - 0.5, y=np.arange(n), width=self.ends - self.starts,
                           brushes=brushes)

    def hover_at(self, x: float, y: float) -> Optional[str]:
        i = nearest_index(y, len(self.rows))
        if i is None:
            return None
        if self.special[i]:
            return f"token {i} {self.rows[i]}: a special token, it covers no characters"
        start, end = int(self.starts[i]), int(self.ends[i])
        return f"token {i} {self.rows[i]}: characters {start}–{end} {self.text[start:end]!r}"

    def token_at(self, x: float, y: float) -> Optional[int]:
        return nearest_index(y, len(self.rows))


class TokenizeView(StageView):
    stage_key = "tokenize"

    def build(self) -> None:
        self.spans = self.add_figure("token_spans", TokenSpans(), 0, 0)
        self.ids = self.add_figure("token_ids", Bars(
            "Token ids: the row each token takes from the embedding table", "token",
            "id", value_name="id"), 1, 0)
        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels(["piece", "id", "special", "start", "end", "text"])
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setMinimumWidth(320)
        self.table.itemSelectionChanged.connect(self._table_selected)
        self.grid.addWidget(self.table, 0, 1, 2, 1)
        self.grid.setColumnStretch(0, 3)
        self.grid.setColumnStretch(1, 2)

    def update_data(self) -> None:
        trace = self.trace
        rows = [f"{label}  ({int(i)})" for label, i in zip(self.labels, trace.input_ids)]
        self.spans.set_data(trace.text, np.asarray(trace.offsets), trace.special_tokens_mask,
                            rows, self.selected)
        self.ids.set_data(trace.input_ids.astype(np.float32), self.labels, self.selected,
                          muted=trace.special_tokens_mask)
        self.table.blockSignals(True)
        self.table.setRowCount(trace.n_seq)
        for i in range(trace.n_seq):
            start, end = (int(v) for v in trace.offsets[i])
            special = bool(trace.special_tokens_mask[i])
            cells = [trace.tokens[i], str(int(trace.input_ids[i])), "yes" if special else "",
                     "" if special else str(start), "" if special else str(end),
                     "" if special else trace.text[start:end]]
            for column, value in enumerate(cells):
                self.table.setItem(i, column, QTableWidgetItem(value))
        self.table.setVerticalHeaderLabels([str(i) for i in range(trace.n_seq)])
        self.table.blockSignals(False)

    def update_selection(self) -> None:
        self.spans.select(self.selected)
        self.ids.set_highlight(self.selected)
        self.table.blockSignals(True)
        self.table.selectRow(self.selected)
        self.table.blockSignals(False)

    def _table_selected(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows:
            self.session.select_token(rows[0].row())

    def stage_values(self) -> dict:
        trace = self.trace
        special = [t for t, s in zip(trace.tokens, trace.special_tokens_mask) if s]
        words = len(trace.text.split())
        return {"n_special": len(special), "specials": ", ".join(dict.fromkeys(special)) or "none",
                "n_words": words, "n_chars": len(trace.text),
                "truncated": "yes" if trace.truncated else "no"}
