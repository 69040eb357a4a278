"""1. Tokenize: text -> pieces, ids, special tokens, character offsets."""
from __future__ import annotations

from typing import Iterator, NamedTuple, Optional

import numpy as np

from ..plots.bar_item import BarItem
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from ...core.trace.trace import Trace
from ...core.analysis.unknown_words import unknown_words
from ..plots.common import UNKNOWN_INK

from ..plots import Bars
from ..plots.common import BAR_BRUSH, MUTED, SELECTED, nearest_index, solid_brush
from ..plots.figure import Figure
from .base import StageView


class TokenSpans(Figure):
    """Each token as a bar over the characters of the text it came from (x: character offset,
    y: token); special tokens, which cover no characters, are thin grey marks."""

    def __init__(self) -> None:
        super().__init__("Which characters of the text each token covers", "character offset", "token")
        self.plot.invertY(True)
        self.spans = BarItem(x0=[], y=[], height=0.7, width=[], pen=None, brush=BAR_BRUSH)
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
        self.y_axis.set_labels(rows)
        self.plot.setRange(xRange=(-1, max(len(text), 1)), yRange=(-0.6, len(rows) - 0.4), padding=0)

    def select(self, selected: int) -> None:
        n = len(self.rows)
        grey, plain = solid_brush(MUTED), solid_brush(BAR_BRUSH)
        brushes = [grey if s else plain for s in self.special]
        if 0 <= selected < n:
            brushes[selected] = solid_brush(SELECTED)
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


class TokenRows(NamedTuple):
    text: str
    pieces: tuple[str, ...]
    labels: tuple[str, ...]          # as on every axis: '␣' for the space a piece carries
    ids: np.ndarray
    offsets: np.ndarray
    special: np.ndarray
    unknown: np.ndarray              # outside the vocabulary: the unknown token ([UNK])


class TokenTable(QAbstractTableModel):
    """piece, id, special, start, end, text per token: computed when a row is drawn, so a
    512-token text costs nothing until it is scrolled to. The piece reads as on the plots
    ('␣' for a leading space); its tooltip is the tokenizer's own spelling ('Ġbank')."""

    COLUMNS = ("piece", "id", "special", "start", "end", "text")

    def __init__(self) -> None:
        super().__init__()
        self.tokens: Optional[TokenRows] = None

    def set_trace(self, trace: Trace, labels: list[str], unknown: Optional[np.ndarray] = None) -> None:
        # the trace's token rows, not the trace: a table kept for a hidden view must not keep
        # a replaced trace's arrays alive
        self.beginResetModel()
        self.tokens = TokenRows(trace.text, trace.tokens, tuple(labels), trace.input_ids, trace.offsets,
                                trace.special_tokens_mask,
                                np.zeros(trace.n_seq, bool) if unknown is None else unknown)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if self.tokens is None or parent.isValid() else len(self.tokens.pieces)

    def columnCount(self, parent=QModelIndex()) -> int:
        return len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        return self.COLUMNS[section] if orientation == Qt.Orientation.Horizontal else str(section)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if self.tokens is None:
            return None
        rows, i = self.tokens, index.row()
        if role == Qt.ItemDataRole.ToolTipRole and index.column() == 0:
            return f"the tokenizer's own piece: {rows.pieces[i]!r}"
        if role == Qt.ItemDataRole.ForegroundRole and rows.unknown[i]:
            return QColor(UNKNOWN_INK)
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        special = bool(rows.special[i])
        start, end = (int(v) for v in rows.offsets[i])
        return (rows.labels[i], str(int(rows.ids[i])),
                "yes" if special else "unknown" if rows.unknown[i] else "",
                "" if special else str(start), "" if special else str(end),
                "" if special else rows.text[start:end])[index.column()]


SIZED_ROWS = 128      # rows measured to size the table's columns


class TokenizeView(StageView):
    stage_key = "tokenize"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.spans = self.add_figure("token_spans", TokenSpans(), 0, 0)
        yield
        self.ids = self.add_figure("token_ids", Bars(
            "Token ids: the row each token takes from the embedding table", "token",
            "id", value_name="id"), 1, 0)
        self.table_model = TokenTable()
        self.table = QTableView()
        self.table.setModel(self.table_model)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        # columns sized from the first rows and those in view, not from every row: measuring
        # 1,000 rows' cells took 180 ms of the GUI thread (the text column stretches anyway)
        self.table.horizontalHeader().setResizeContentsPrecision(SIZED_ROWS)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.selectionModel().selectionChanged.connect(self._table_selected)
        self.add_widget(self.table, 0, 1, 2, 1)
        self.grid.setColumnStretch(0, 3)
        self.grid.setColumnStretch(1, 2)

    def update_data(self) -> None:
        trace = self.trace
        rows = [f"{label}  ({int(i)})" for label, i in zip(self.labels, trace.input_ids)]
        self.spans.set_data(trace.text, np.asarray(trace.offsets), trace.special_tokens_mask,
                            rows, self.selected)
        self.ids.set_data(trace.input_ids.astype(np.float32), self.labels, self.selected,
                          muted=trace.special_tokens_mask)
        tokenizer = self.session.model.tokenizer if self.session.model is not None else None
        unknown = unknown_words(trace, tokenizer.unknown_id if tokenizer is not None else None).mask
        self.table_model.set_trace(trace, self.labels, unknown)
        # every column as wide as its widest cell (the text column last, never clipped), and
        # the table as wide as its columns
        header = self.table.horizontalHeader()
        # the stretched last column's own width is taken again from its content (a stretch
        # remembers the width it started from, and the column would not shrink below it)
        header.setStretchLastSection(False)
        self.table.resizeColumnsToContents()
        header.setStretchLastSection(True)
        width = sum(header.sectionSize(c) for c in range(header.count()))
        self.table.setMinimumWidth(min(width + self.table.verticalHeader().width()
                                       + self.table.verticalScrollBar().sizeHint().width()
                                       + 2 * self.table.frameWidth() + 4, 520))

    def update_selection(self) -> None:
        self.spans.select(self.selected)
        self.ids.set_highlight(self.selected)
        selection = self.table.selectionModel()
        selection.blockSignals(True)
        self.table.selectRow(self.selected)
        selection.blockSignals(False)
        self.table.viewport().update()

    def _table_selected(self, *_) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows:
            self.session.select_token(rows[0].row())

    def stage_flags(self) -> dict:
        return {"space_marker": any(p[:1] in ("Ġ", "▁") for p in self.trace.tokens)}

    def stage_values(self) -> dict:
        trace = self.trace
        special = [t for t, s in zip(trace.tokens, trace.special_tokens_mask) if s]
        words = len(trace.text.split())
        marked = [p for p in trace.tokens if p[:1] in ("Ġ", "▁")]
        return {"raw_marker": marked[0][0] if marked else "", "marked_piece": marked[0] if marked else "",
                "n_special": len(special), "specials": ", ".join(dict.fromkeys(special)) or "none",
                "n_words": words, "n_chars": len(trace.text),
                "truncated": "yes" if trace.truncated else "no"}
