"""A matrix as an image: a colour bar, token names on the axes, the exact value and the row and
column names on hover, the selected token outlined, masked cells hatched."""
from __future__ import annotations

import functools
from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QWidget

from ...core.model import measures
from . import cell_text
from .common import HIGHLIGHT_PEN, LABEL_STYLE, cache_on_screen, finite_span, format_value, nearest_index
from .figure import Figure, adopt_plot_menus

DIVERGING = "CET-D1A"        # blue - white - red: signed values, zero is white
# white -> dark blue: weights and probabilities, 0 is white (the selection is orange)
CELL_FONT_POINTS = 8
SEQUENTIAL = pg.ColorMap(pos=[0.0, 0.5, 1.0], color=["#ffffff", "#6baed6", "#08306b"], name="blues")


@functools.lru_cache(maxsize=1)
def diverging_map() -> pg.ColorMap:
    """The signed values' colour map, read from pyqtgraph's file once: pyqtgraph reads a named
    map's file again for every colour bar (~10 ms of the GUI thread each)."""
    return pg.colormap.get(DIVERGING)


class Heatmap(Figure):
    """rows x cols values. `row_names`/`col_names` say what an index is ("query", "dim") for
    the hover text; `click` says which axis holds tokens (a click selects that token)."""

    columnWindowChanged = Signal(int, int, int)     # first column shown, columns shown, in all

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
        self._cell_names: list[list[str]] = []
        self._cell_chars, self._cell_limit = 12, 0
        self._cell_font = QFont()
        self._cell_font.setPointSize(CELL_FONT_POINTS)
        self._min_column_pixels: Optional[float] = None     # set_column_window
        self._first_column = 0
        self._keep_visible: Optional[int] = None
        self._window: Optional[tuple[int, int]] = None
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
        # made by finish() (the window's turns after the view is built, or before an export)
        # or first use; set_data does not make it (a view of six heatmaps made six colour bars,
        # each a PlotItem, in the turn that drew it: 0.3-0.5 s on a loaded machine)
        self._colorbar: Optional[pg.ColorBarItem] = None
        self._levels: Optional[tuple[float, float]] = None
        self.row_band = self._band()
        self.col_band = self._band()
        # the words in the cells follow the cells' size (a window resized, an export laid out)
        self.plot.vb.sigResized.connect(self._on_resized)

    def _on_resized(self, *_) -> None:
        if self._min_column_pixels:
            self._fit_columns()
        elif self._cell_names:
            self._place_cell_labels()

    @property
    def colorbar(self) -> pg.ColorBarItem:
        """The colour bar (a PlotItem of its own, about half of what a heatmap costs to make):
        made on first use, or by finish() while the window is idle."""
        if self._colorbar is None:
            bar = pg.ColorBarItem(colorMap=diverging_map() if self.signed else SEQUENTIAL,
                                  interactive=False, width=14, colorMapMenu=False,
                                  pen=pg.mkPen("#888"))
            # kept before it is set up: setting it up signals, and a slot may ask for it again
            self._colorbar = bar
            adopt_plot_menus(bar, self)          # a ColorBarItem is a PlotItem
            bar.axis.setLabel(self._value_label, **LABEL_STYLE)
            bar.axis.setWidth(None)          # room for the tick values and the label
            bar.axis.enableAutoSIPrefix(False)
            bar.setImageItem(self.image)
            if self._levels is not None:
                bar.setLevels(self._levels)
            self.ci.addItem(bar, row=1, col=1)
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
        self._levels = levels
        if self._colorbar is not None:
            self._colorbar.setLevels(levels)
        self.image.setRect(QRectF(-0.5, -0.5, width, height))
        self.masked_background.setRect(QRectF(-0.5, -0.5, width, height))
        self.masked_background.setVisible(bool(np.isnan(values).any()))
        self.y_axis.set_labels(self.row_labels)
        self.x_axis.set_labels(self.col_labels)
        self.plot.setRange(xRange=(-0.5, width - 0.5), yRange=(-0.5, height - 0.5), padding=0)
        self._cell_names = []                      # (set_cell_labels gives the new ones)
        if self._min_column_pixels:
            self._fit_columns()
        else:
            self._place_cell_labels()

    def set_cell_labels(self, names: Sequence[Sequence[str]], limit: int, width: int = 12) -> None:
        """names[row][col] written in each cell, in black or white (whichever reads on the
        cell's colour), cut to `width` characters and to the cell's width in pixels (a word
        that does not fit at all is left out: it is on hover); none when more than `limit`
        cells are in view."""
        self._cell_names = [list(row) for row in names]
        self._cell_chars = width
        self._cell_limit = limit
        self._place_cell_labels()

    def _place_cell_labels(self, *_) -> None:
        names = self._cell_names
        rows = len(names)
        cols = len(names[0]) if rows else 0
        first, last = self.visible_columns()
        last = min(last, cols - 1)
        shown = [(row, col) for row in range(rows) for col in range(first, last + 1)]
        if len(shown) > self._cell_limit:
            shown = []
        while len(self._cell_texts) < len(shown):
            text = pg.TextItem(anchor=(0.5, 0.5), color=cell_text.BLACK)
            text.setFont(self._cell_font)
            self.plot.addItem(text)
            self._cell_texts.append(text)
        for text in self._cell_texts[len(shown):]:
            text.setVisible(False)
        metrics = QFontMetricsF(self._cell_font)
        if shown and self.row_pixels() < metrics.height():
            # rows lower than a line of text: the words would run over each other (a prediction
            # table of 58 positions at a laptop's size); they are on hover
            shown = []
            for text in self._cell_texts:
                text.setVisible(False)
        if not shown:
            return
        pixels = self.cell_pixels()
        colours = self.cell_colours()
        for text, (row, col) in zip(self._cell_texts, shown):
            text.setText(cell_text.elide(names[row][col], metrics, pixels, self._cell_chars))
            text.setColor(str(cell_text.inks(colours[row, col])))
            text.setPos(col, row)
            text.setVisible(True)

    def cell_pixels(self) -> float:
        """How wide one cell is on screen (or in the export being drawn), in pixels."""
        (x0, x1), _ = self.plot.vb.viewRange()
        return self.plot.vb.width() / max(x1 - x0, 1e-9)

    def row_pixels(self) -> float:
        """How high one cell is on screen (or in the export being drawn), in pixels."""
        _, (y0, y1) = self.plot.vb.viewRange()
        return self.plot.vb.height() / max(y1 - y0, 1e-9)

    def cell_colours(self) -> np.ndarray:
        """The colour of every cell as drawn, [rows, cols, 3] in 0 … 1 (masked cells: the
        grey of the hatching behind them, read as light)."""
        low, high = self.image.levels if self.image.levels is not None else (0.0, 1.0)
        scaled = (np.nan_to_num(self.values, nan=low) - low) / max(high - low, 1e-12)
        colours = self.colorbar.colorMap().map(np.clip(scaled, 0.0, 1.0).ravel(), mode="float")
        colours = np.asarray(colours, dtype=np.float64)[:, :3].reshape(*self.values.shape, 3)
        colours[np.isnan(self.values)] = 0.85
        return colours

    # -- a window of columns, for tables too wide to read at once --------------------------------
    def set_column_window(self, min_pixels: Optional[float]) -> None:
        """Show only as many columns as fit `min_pixels` wide each (None: all); the window
        moves with scroll_to and follows the figure's width."""
        self._min_column_pixels = min_pixels
        self._fit_columns()

    def visible_columns(self) -> tuple[int, int]:
        """(first, last) column in view."""
        (x0, x1), _ = self.plot.vb.viewRange()
        width = self.extent[1]
        return max(0, int(np.ceil(x0))), min(width - 1, int(np.floor(x1)))

    def column_window(self) -> tuple[int, int, int]:
        """(first column shown, columns shown, columns in all)."""
        width = self.extent[1]
        return self._first_column, min(self._window_columns(), width), width

    def _window_columns(self, width: Optional[int] = None) -> int:
        width = self.extent[1] if width is None else width
        if not self._min_column_pixels:
            return width
        return max(1, min(width, int(self.plot.vb.width() // self._min_column_pixels)))

    def window_for(self, total: int, keep: Optional[int]) -> tuple[int, int]:
        """(first, count): the column window that data `total` columns wide would show with
        `keep` in it, at the figure's present width (a view asks for what it will show
        before it has the data)."""
        count = self._window_columns(total)
        first = self._first_column
        if keep is not None and not first <= keep < first + count:
            first = keep - count // 2
        return max(0, min(first, total - count)), count

    def scroll_to(self, first: int) -> None:
        """Show columns from `first` on (the user scrolled: the window stops following)."""
        self._first_column, self._keep_visible = int(first), None
        self._fit_columns()

    def ensure_column_visible(self, col: Optional[int]) -> None:
        """Keep `col` (the selected token) in the window, now and when the width changes."""
        self._keep_visible = col
        self._fit_columns()

    def _fit_columns(self, *_) -> None:
        width = self.extent[1]
        count = self._window_columns()
        keep = self._keep_visible
        if keep is not None and not self._first_column <= keep < self._first_column + count:
            self._first_column = keep - count // 2
        first = max(0, min(self._first_column, width - count))
        window = (first, count)
        self._first_column = first
        self.plot.setXRange(first - 0.5, first + count - 0.5, padding=0)
        if window != self._window:
            self._window = window
            self.columnWindowChanged.emit(first, count, width)
        self._place_cell_labels()

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
