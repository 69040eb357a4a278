"""The Positions results table: one row per variant, one column per measure, each cell the mean
(min–max) over the seeds; per ranked column the best variant in bold, the variants whose seed
range overlaps the best's shaded and marked ≈ (a tie, not a difference); a last row for the
model opened in the stepper (its interference measures only)."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QPen
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QStyle, QStyledItemDelegate,
                               QStyleOptionViewItem, QTableWidget, QTableWidgetItem, QWidget)

from .results import MEASURES, LabTable, your_model_text

BEST = QColor("#d9ead3")
TIE = QColor("#fff2cc")
YOUR_MODEL_ROW = QColor("#eef3fb")
TIE_MARK = "≈ "
SELECTION_TINT = QColor(31, 119, 180, 45)
SELECTION_EDGE = QColor("#1f77b4")


class _KeepShading(QStyledItemDelegate):
    """The selected row keeps its best/tie shading: a blue tint and a frame mark it instead of
    the style's opaque selection fill."""

    def paint(self, painter, option, index) -> None:
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        if not selected:
            super().paint(painter, option, index)
            return
        plain = QStyleOptionViewItem(option)
        plain.state &= ~QStyle.StateFlag.State_Selected
        if index.data(Qt.ItemDataRole.BackgroundRole) is None:   # the view painted a selection fill
            painter.fillRect(option.rect, option.palette.base())
        super().paint(painter, plain, index)
        painter.save()
        painter.fillRect(option.rect, SELECTION_TINT)
        painter.setPen(QPen(SELECTION_EDGE, 2))
        rect = option.rect.adjusted(0, 1, 0, -1)
        painter.drawLine(rect.topLeft(), rect.topRight())
        painter.drawLine(rect.bottomLeft(), rect.bottomRight())
        painter.restore()


class ResultsTable(QTableWidget):
    variantSelected = Signal(str)

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.setColumnCount(1 + len(MEASURES))
        self.setHorizontalHeaderLabels(["variant"] + [m.title for m in MEASURES])
        for column, measure in enumerate(MEASURES, start=1):
            self.horizontalHeaderItem(column).setToolTip(measure.tip)
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setWordWrap(False)
        self.setItemDelegate(_KeepShading(self))
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table: Optional[LabTable] = None
        self.variants: list[str] = []
        self.itemSelectionChanged.connect(self._on_selection)

    def show_table(self, table: LabTable) -> None:
        self.table = table
        self.variants = table.variants
        self.blockSignals(True)
        self.setRowCount(len(self.variants) + 1)
        bold = QFont(self.font())
        bold.setBold(True)
        for row, variant in enumerate(self.variants):
            self.setItem(row, 0, self._item(variant, bold))
            for column, measure in enumerate(MEASURES, start=1):
                standing = table.standing(variant, measure.key)
                first, second = table.parts(variant, measure)
                text = (TIE_MARK if standing == "tie" else "") + first + (f"\n{second}" if second else "")
                item = self._item(text, bold if standing == "best" else None)
                if standing in ("best", "tie"):
                    item.setBackground(QBrush(BEST if standing == "best" else TIE))
                item.setToolTip(self._tip(table, variant, measure, standing))
                item.setData(Qt.ItemDataRole.UserRole, standing)
                self.setItem(row, column, item)
        self.blockSignals(False)
        self.show_your_model("your model", "open a model in the Stepper", None)

    def show_your_model(self, name: str, note: str, interference: Optional[dict]) -> None:
        """The last row: the opened model's interference measures (not trained here: no loss)."""
        row = len(self.variants)
        label = self._item("your model")
        label.setToolTip(f"the model open in the stepper: {name}" + (f"\n{note}" if note else ""))
        self.setItem(row, 0, label)
        for column, measure in enumerate(MEASURES, start=1):
            text = your_model_text(measure, interference)
            if column == 1 and interference is None:
                text = note
            item = self._item(text)
            self.setItem(row, column, item)
        if interference is None:
            self.setSpan(row, 1, 1, len(MEASURES))
        elif self.columnSpan(row, 1) > 1:
            self.setSpan(row, 1, 1, 1)
        for column in range(self.columnCount()):
            item = self.item(row, column)
            if item is not None:
                item.setFlags(Qt.ItemFlag.ItemIsEnabled)          # not selectable: no variant
                item.setBackground(QBrush(YOUR_MODEL_ROW))
        self.resizeColumnsToContents()
        self.resizeRowsToContents()
        self._fit_height()

    def content_height(self) -> int:
        """Pixels that show every row without scrolling (and the horizontal scroll bar when the
        columns are wider than the table)."""
        rows = sum(self.rowHeight(r) for r in range(self.rowCount()))
        height = rows + self.horizontalHeader().sizeHint().height() + 2 * self.frameWidth() + 4
        if self.horizontalHeader().length() > self.width() - 2 * self.frameWidth():
            height += self.horizontalScrollBar().sizeHint().height()
        return height

    def _fit_height(self) -> None:
        self.setFixedHeight(self.content_height())       # every row, and no empty band below

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.rowCount() and self.height() != self.content_height():
            self._fit_height()

    def select_variant(self, variant: str) -> None:
        if variant in self.variants:
            self.selectRow(self.variants.index(variant))

    def selected_variant(self) -> Optional[str]:
        rows = {index.row() for index in self.selectedIndexes()}
        row = min(rows) if rows else -1
        return self.variants[row] if 0 <= row < len(self.variants) else None

    def _on_selection(self) -> None:
        variant = self.selected_variant()
        if variant is not None:
            self.variantSelected.emit(variant)

    @staticmethod
    def _item(text: str, font: Optional[QFont] = None) -> QTableWidgetItem:
        item = QTableWidgetItem(text)
        if font is not None:
            item.setFont(font)
        return item

    @staticmethod
    def _tip(table: LabTable, variant: str, measure, standing: str) -> str:
        spread = table.spread(variant, measure.key)
        if spread is None:
            return f"{measure.tip}: not measured for {variant}"
        seeds = f"{spread.n} seed{'s' if spread.n != 1 else ''}"
        tip = f"{measure.tip}\nmean {spread.mean:.5g}, min {spread.low:.5g}, max {spread.high:.5g} over {seeds}"
        best = table.best(measure.key)
        if standing == "best":
            tip += "\nbest mean in this column"
        elif standing == "tie":
            tip += f"\nits range overlaps {best}'s: a tie at {seeds}, not a difference"
        elif standing == "apart":
            tip += f"\nits whole range is worse than {best}'s"
        return tip
