"""A matrix as an image: a colour bar, token names on the axes, the exact value and the row and
column names on hover, the selected token outlined, masked cells hatched."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QWidget

from ...core import measures
from .common import (HIGHLIGHT_PEN, adopt_plot_menus, LABEL_STYLE, Figure, cache_on_screen, finite_span, format_value,
                     nearest_index)

DIVERGING = "CET-D1A"        # blue - white - red: signed values, zero is white
# white -> dark blue: weights and probabilities, 0 is white (the selection is orange)
SEQUENTIAL = pg.ColorMap(pos=[0.0, 0.5, 1.0], color=["#ffffff", "#6baed6", "#08306b"], name="blues")


class Heatmap(Figure):
    """rows x cols values. `row_names`/`col_names` say what an index is ("query", "dim") for
    the hover text; `click` says which axis holds tokens (a click selects that token)."""

    def __init__(self, title: str, x_label: str, y_label: str, *, signed: bool = True,
                 value_label: str = "", row_names: str = "row", col_names: str = "column",
                 click: Optional[str] = "row", parent: Optional[QWidget] = None) -> None:
        super().__init__(title, x_label, y_label, parent)
        self.signed = signed
        self.row_names, self.col_names, self.click = row_names, col_names, click
        self.values = np.zeros((1, 1), dtype=np.float32)
        self.row_labels: Optional[list[str]] = None
        self.col_labels: Optional[list[str]] = None
        self.describe = None     # optional (row, col) -> hover text
        self.extent = (1, 1)
        self.exact = None        # optional (row, col) -> value when the image is a downsample
        self.plot.invertY(True)  # row 0 on top, as a matrix is written
        self._cell_texts: list[pg.TextItem] = []       # set_cell_labels: created once, reused
        self.masked_background = QGraphicsRectItem()
        self.masked_background.setBrush(QBrush(QColor("#b0b0b0"), Qt.BrushStyle.BDiagPattern))
        self.masked_background.setPen(QPen(Qt.PenStyle.NoPen))
        self.masked_background.setZValue(-10)
        self.plot.addItem(self.masked_background)
        self.image = pg.ImageItem(axisOrder="row-major")
        # drawn once into a pixmap at screen resolution, re-drawn only when data or zoom change
        cache_on_screen(self.image)
        self.plot.addItem(self.image)
        self._value_label = value_label
        self._colorbar: Optional[pg.ColorBarItem] = None    # made by finish() or first use
        self.row_band = self._band()
        self.col_band = self._band()

    @property
    def colorbar(self) -> pg.ColorBarItem:
        """The colour bar (a PlotItem of its own, about half of what a heatmap costs to make):
        made on first use, or by finish() while the window is idle."""
        if self._colorbar is None:
            bar = pg.ColorBarItem(colorMap=DIVERGING if self.signed else SEQUENTIAL,
                                  interactive=False, width=14, colorMapMenu=False,
                                  pen=pg.mkPen("#888"))
            adopt_plot_menus(bar, self)          # a ColorBarItem is a PlotItem
            bar.axis.setLabel(self._value_label, **LABEL_STYLE)
            bar.axis.setWidth(None)          # room for the tick values and the label
            bar.axis.enableAutoSIPrefix(False)
            bar.setImageItem(self.image)
            self.ci.addItem(bar, row=1, col=1)
            self._colorbar = bar
        return self._colorbar

    def finish(self) -> None:
        self.colorbar

    @property
    def finished(self) -> bool:
        return self._colorbar is not None

    def _band(self) -> QGraphicsRectItem:
        band = QGraphicsRectItem()
        band.setPen(HIGHLIGHT_PEN)
        band.setBrush(QBrush(Qt.BrushStyle.NoBrush))
        band.setZValue(10)
        band.setVisible(False)
        self.plot.addItem(band)
        return band

    def set_data(self, values: np.ndarray, row_labels: Optional[Sequence[str]] = None,
                 col_labels: Optional[Sequence[str]] = None,
                 levels: Optional[tuple[float, float]] = None, exact=None,
                 extent: Optional[tuple[int, int]] = None, describe=None) -> None:
        """`extent` (height, width) places a downsampled image over the full index range
        (`exact(row, col)` then gives the true value under the cursor); `describe(row, col)`
        replaces the hover text."""
        values = np.asarray(values, dtype=np.float32)
        if not np.isfinite(values).all():          # -inf (masked) shows the hatching behind
            values = np.where(np.isfinite(values), values, np.nan).astype(np.float32)
        self.values, self.exact, self.describe = values, exact, describe
        self.row_labels = list(row_labels) if row_labels is not None else None
        self.col_labels = list(col_labels) if col_labels is not None else None
        if levels is None:
            limit = measures.robust_limit(values)
            if self.signed:
                levels = (-limit, limit)
            else:
                finite = values[np.isfinite(values)]
                low = float(finite.min()) if finite.size else 0.0
                levels = (min(0.0, low), max(limit, 1e-9))
        levels = finite_span(levels, (-1.0, 1.0) if self.signed else (0.0, 1.0))
        height, width = extent if extent is not None else values.shape
        self.extent = (height, width)
        self.image.setImage(values, autoLevels=False, levels=levels)
        self.colorbar.setLevels(levels)
        self.image.setRect(QRectF(-0.5, -0.5, width, height))
        self.masked_background.setRect(QRectF(-0.5, -0.5, width, height))
        self.masked_background.setVisible(bool(np.isnan(values).any()))
        self.y_axis.set_labels(self.row_labels)
        self.x_axis.set_labels(self.col_labels)
        self.plot.setRange(xRange=(-0.5, width - 0.5), yRange=(-0.5, height - 0.5), padding=0)

    def set_cell_labels(self, names: Sequence[Sequence[str]], shade: np.ndarray, limit: int,
                        width: int = 12) -> None:
        """names[row][col] written in each cell (cut to `width` characters), white where
        shade[row, col] > 0.55 (dark cells); none when there are more than `limit` cells: the
        names are then on hover only."""
        rows = len(names)
        cols = len(names[0]) if rows else 0
        count = rows * cols if rows * cols <= limit else 0
        while len(self._cell_texts) < count:
            text = pg.TextItem(anchor=(0.5, 0.5), color="#000")
            self.plot.addItem(text)
            self._cell_texts.append(text)
        for text in self._cell_texts[count:]:
            text.setVisible(False)
        for k, text in enumerate(self._cell_texts[:count]):
            row, col = divmod(k, cols)
            name = names[row][col]
            text.setText(name if len(name) <= width else name[:width - 1] + "…")
            text.setColor("#fff" if shade[row, col] > 0.55 else "#000")
            text.setPos(col, row)
            text.setVisible(True)

    def set_highlight(self, row: Optional[int] = None, col: Optional[int] = None) -> None:
        height, width = self.extent
        self.row_band.setVisible(row is not None and 0 <= row < height)
        if row is not None:
            self.row_band.setRect(QRectF(-0.5, row - 0.5, width, 1))
        self.col_band.setVisible(col is not None and 0 <= col < width)
        if col is not None:
            self.col_band.setRect(QRectF(col - 0.5, -0.5, 1, height))
        self.y_axis.set_emphasis([row])
        self.x_axis.set_emphasis([col])

    def value_at(self, row: int, col: int) -> float:
        if self.exact is not None:
            return self.exact(row, col)
        return float(self.values[row, col])

    def _name(self, kind: str, labels: Optional[list[str]], i: int) -> str:
        if labels is not None and i < len(labels):
            return f"{kind} {i} '{labels[i]}'"
        return f"{kind} {i}"

    def hover_at(self, x: float, y: float) -> Optional[str]:
        height, width = self.extent
        row, col = nearest_index(y, height), nearest_index(x, width)
        if row is None or col is None:
            return None
        if self.describe is not None:
            return self.describe(row, col)
        value = self.value_at(row, col)
        shown = "masked (−∞ before softmax)" if np.isnan(value) and self.masked_background.isVisible() \
            else format_value(value)
        return (f"{self._name(self.row_names, self.row_labels, row)}, "
                f"{self._name(self.col_names, self.col_labels, col)}: {shown}")

    def token_at(self, x: float, y: float) -> Optional[int]:
        height, width = self.extent
        if self.click == "row":
            return nearest_index(y, height) if nearest_index(x, width) is not None else None
        if self.click == "col":
            return nearest_index(x, width) if nearest_index(y, height) is not None else None
        return None

    def cell_at(self, x: float, y: float) -> Optional[tuple[int, int]]:
        height, width = self.extent
        row, col = nearest_index(y, height), nearest_index(x, width)
        return None if row is None or col is None else (row, col)
