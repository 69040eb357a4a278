"""A figure's title: wrapped at spaces to the figure's width, cut with '…' past three lines."""
from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics

from .common import TITLE_POINTS

def wrap_lines(text: str, metrics: QFontMetrics, width: int, max_lines: int) -> list[str]:
    """`text` broken at spaces into lines at most `width` pixels wide; past `max_lines`, the
    last line is cut with '…' (as is a single word wider than a line)."""
    lines: list[str] = []
    current = ""
    slack = 4          # elidedText measures a few pixels wider than horizontalAdvance at times
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if current and metrics.horizontalAdvance(candidate) > width - slack:
            lines.append(current)
            current = word
        else:
            current = candidate
    lines.append(current)
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [" ".join(lines[max_lines - 1:])]
    return [metrics.elidedText(line, Qt.TextElideMode.ElideRight, width) for line in lines]


class TitleLabel(pg.LabelItem):
    """A figure title that never forces the figure wider than its window: too long a title is
    wrapped (at spaces), and only what does not fit on three lines is cut with '…'
    (pyqtgraph's LabelItem makes its text width the minimum width)."""

    MAX_LINES = 3

    def __init__(self, text: str, points: int = TITLE_POINTS, color: str = "#222") -> None:
        self.full_text = text
        self.points = points
        self.lines: list[str] = [text]         # as shown
        super().__init__(text, size=f"{points}pt", color=color)

    def set_full_text(self, text: str) -> None:
        self.full_text = text
        self._elide()

    def _elide(self) -> None:
        font = QFont()
        font.setPointSize(self.points)
        available = max(int(self.width()) - 8, 40)
        self.lines = wrap_lines(self.full_text, QFontMetrics(font), available, self.MAX_LINES)
        shown = "<br>".join(html.escape(line, quote=False) for line in self.lines)
        if shown != self.text:
            self.setText(shown)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event is not None:
            self._elide()

    def updateMin(self) -> None:
        height = self.itemRect().height()
        self.setMinimumWidth(0)
        self.setMinimumHeight(height)
        self._sizeHint = {Qt.SizeHint.MinimumSize: (0, height), Qt.SizeHint.PreferredSize: (0, height),
                          Qt.SizeHint.MaximumSize: (-1, -1), Qt.SizeHint.MinimumDescent: (0, 0)}
        self.updateGeometry()
