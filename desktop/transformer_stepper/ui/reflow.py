"""Layouts that adapt to a laptop's screen rather than push the window past it.

`ReflowGrid` is a grid of plots that, when its width is less than the grid needs, lays the same
widgets out in one column (in reading order: row by row, left to right), each at least
`NARROW_ROW` pixels high; inside `scrolling()` that column scrolls. `scrolling()` puts a panel in
a frameless scroll area whose own minimum size is small, so a dock or a tab never raises the
window's minimum size: the panel keeps its minimum and scrolls inside itself."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QRect, QSize, Qt, QTimer
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QScrollArea, QSizePolicy, QStackedWidget, QWidget

NARROW_ROW = 240           # px: a plot's height in the one-column layout
# about 150 x 110 px of view box once a title, a tick column and an axis label are around it
LEGIBLE_FIGURE = QSize(230, 200)


class ReflowGrid(QGridLayout):
    """A QGridLayout (placed with addWidget(widget, row, col, row_span, col_span) as usual) that
    becomes one scrolling column when narrower than its columns need."""

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.narrow = False
        self._announced = -1          # the minimum height the widgets above were last told of

    # the grid's own needs, from its items' minimum sizes
    def _wide_minimum(self) -> QSize:
        return super().minimumSize()

    def _items_in_reading_order(self) -> list:
        placed = []
        for index in range(self.count()):
            item = self.itemAt(index)
            widget = item.widget()
            if widget is not None and widget.isHidden():
                continue
            row, col, _rows, _cols = self.getItemPosition(index)
            placed.append((row, col, index, item))
        return [item for *_, item in sorted(placed, key=lambda p: p[:3])]

    def _column_heights(self) -> list[int]:
        return [max(NARROW_ROW, item.minimumSize().height()) for item in self._items_in_reading_order()]

    def _column_height(self) -> int:
        heights = self._column_heights()
        margins = self.contentsMargins()
        return (sum(heights) + self.verticalSpacing() * max(0, len(heights) - 1)
                + margins.top() + margins.bottom())

    def _is_narrow(self, width: int) -> bool:
        return width < self._wide_minimum().width() and len(self._items_in_reading_order()) > 1

    def minimumSize(self) -> QSize:
        # as one column, the column's height: the splitter, stack and scroll area above ask for
        # a minimum size, not a height for their width, so without it the column ran past the
        # bottom of what the tab scrolls and its last figures could not be reached
        items = self._items_in_reading_order()
        margins = self.contentsMargins()
        least = max((item.minimumSize().width() for item in items), default=0)
        height = self._column_height() if self.narrow else self._wide_minimum().height()
        return QSize(least + margins.left() + margins.right(), height)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        if self._is_narrow(width):
            return self._column_height()
        return self._wide_minimum().height()

    def setGeometry(self, rect: QRect) -> None:
        self.narrow = self._is_narrow(rect.width())
        needed = self.minimumSize().height()
        if needed != self._announced:
            # the minimum changed with the width: the widgets above learn it after this layout
            # pass (at once would lay them out again from inside it)
            self._announced = needed
            QTimer.singleShot(0, self, self._announce)
        if not self.narrow:
            super().setGeometry(rect)
            return
        margins = self.contentsMargins()
        x, y = rect.x() + margins.left(), rect.y() + margins.top()
        width = rect.width() - margins.left() - margins.right()
        for item, height in zip(self._items_in_reading_order(), self._column_heights()):
            item.setGeometry(QRect(x, y, width, height))
            y += height + self.verticalSpacing()


    def _announce(self) -> None:
        widget = self.parentWidget()
        if widget is not None:
            self.invalidate()
            widget.updateGeometry()


class CurrentPageStack(QStackedWidget):
    """A QStackedWidget whose size hints are its current page's: a plain one asks for the largest
    minimum of every page it holds, so one wide page (a table of controls) would make every other
    page scroll sideways on a laptop screen."""

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.currentChanged.connect(lambda _: self.updateGeometry())

    def minimumSizeHint(self) -> QSize:
        page = self.currentWidget()
        if page is None:
            return super().minimumSizeHint()
        return page.minimumSizeHint().expandedTo(page.minimumSize())

    def sizeHint(self) -> QSize:
        page = self.currentWidget()
        if page is None:
            return super().sizeHint()
        return page.sizeHint().expandedTo(self.minimumSizeHint())


def scrolling(widget: QWidget, horizontal: bool = True) -> QScrollArea:
    """`widget` in a frameless, resizable scroll area: it keeps its minimum size and scrolls
    when its place is smaller."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    if not horizontal:
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
    area.setWidget(widget)
    return area


class ElidingLabel(QLabel):
    """A one-line label that takes the room left to it and ends with '…' when its text is
    longer (the whole text in its tooltip, and in text()): in a toolbar it never pushes the
    toolbar into its '»' overflow menu, where the message would hide."""

    def __init__(self, text: str = "", parent: Optional[QWidget] = None) -> None:
        super().__init__(text, parent)
        # it may grow into the room left, and shrink to 40 px before the toolbar overflows
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(40)

    def setText(self, text: str) -> None:
        super().setText(text)
        self.setToolTip(text)

    def minimumSizeHint(self) -> QSize:
        return QSize(40, super().minimumSizeHint().height())

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        rect = self.contentsRect()
        shown = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, rect.width())
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), shown)
