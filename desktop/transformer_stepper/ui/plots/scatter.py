"""Labelled points (tokens in a 2-D projection, pre- vs post-activation values); the nearest
point's label and exact coordinates on hover. Many points (an 8B model's 14,336 hidden units)
reach pyqtgraph one per pixel of the plot: its per-point Python took 0.17 s of the GUI thread
for them all, and the points it was not given are within a pixel of one it was (the hover
still reads every point)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from .common import BAR_BRUSH, SELECTED, format_value, no_points_if_none_finite, solid_brush
from .figure import Figure


REDUCE_ABOVE = 2_000          # more points than this are drawn one per pixel
DEFAULT_PIXELS = 1_000        # a plot not laid out yet: its size taken as this many pixels


def one_per_pixel(x: np.ndarray, y: np.ndarray, cell_x: float, cell_y: float) -> np.ndarray:
    """Indices of the finite points keeping one in each occupied cell of a grid of `cell_x` ×
    `cell_y` (a pixel, in data units) laid from the points' minimum, plus the points at the
    extremes (the view's auto-range stays the data's); every finite point when a cell is 0."""
    finite = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    if not len(finite) or not (cell_x > 0 and cell_y > 0):
        return finite
    fx, fy = x[finite].astype(np.float64), y[finite].astype(np.float64)
    gx = np.floor((fx - fx.min()) / cell_x).astype(np.int64)
    gy = np.floor((fy - fy.min()) / cell_y).astype(np.int64)
    rows = int(gy.max()) + 1
    if (int(gx.max()) + 1) * rows >= 2 ** 62:        # zoomed in past counting the cells
        return finite
    _, first = np.unique(gx * rows + gy, return_index=True)
    extremes = [np.argmin(fx), np.argmax(fx), np.argmin(fy), np.argmax(fy)]
    return finite[np.union1d(first, extremes)]


class Scatter(Figure):
    def __init__(self, title: str, x_label: str = "", y_label: str = "", *, tokens: bool = False,
                 parent: Optional[QWidget] = None) -> None:
        super().__init__(title, x_label, y_label, parent)
        self.tokens = tokens
        self.points = pg.ScatterPlotItem(size=6, pen=None, brush=pg.mkBrush(BAR_BRUSH))
        self.plot.addItem(self.points)
        self.x = np.zeros(0)
        self.y = np.zeros(0)
        self.labels: Optional[list[str]] = None
        self.shown = np.zeros(0, dtype=np.int64)       # the points given to pyqtgraph
        self._style: tuple = (None, 6.0, None)         # (colour, size, highlight)
        self._cells: Optional[tuple[float, float]] = None    # the pixel the points were cut to
        # zoomed or resized: a pixel is another size, the points are cut again
        self.plot.vb.sigRangeChanged.connect(self._view_changed)
        self.plot.vb.sigResized.connect(self._view_changed)

    def set_points(self, x: np.ndarray, y: np.ndarray, labels: Optional[Sequence[str]] = None,
                   highlight: Optional[int] = None, size: float = 6, alpha: int = 160) -> None:
        self.x, self.y = np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.float32)
        self.labels = list(labels) if labels is not None else None
        colour = QColor(BAR_BRUSH)
        colour.setAlpha(alpha)
        self._style = (colour, size, highlight)
        self.plot.enableAutoRange()            # (first: the pixel is the data's span over the plot)
        self._draw_points()

    def _pixel(self) -> tuple[float, float]:
        """One pixel of the plot in data units: of the data's span while the view follows the
        data, else of the view's range."""
        vb = self.plot.vb
        width = vb.width() if vb.width() >= 1 else DEFAULT_PIXELS
        height = vb.height() if vb.height() >= 1 else DEFAULT_PIXELS
        follow = vb.autoRangeEnabled()
        (x0, x1), (y0, y1) = vb.viewRange()
        finite = np.isfinite(self.x) & np.isfinite(self.y)
        if follow[0] and finite.any():
            x0, x1 = float(self.x[finite].min()), float(self.x[finite].max())
        if follow[1] and finite.any():
            y0, y1 = float(self.y[finite].min()), float(self.y[finite].max())
        return (x1 - x0) / width, (y1 - y0) / height

    def _draw_points(self) -> None:
        colour, size, highlight = self._style
        if no_points_if_none_finite(self.x, self.y):     # NaN/Inf everywhere: nothing to draw
            self.shown = np.zeros(0, dtype=np.int64)
            self.points.setData(x=[], y=[])
            return
        if len(self.x) > REDUCE_ABOVE:
            self._cells = self._pixel()
            shown = one_per_pixel(self.x, self.y, *self._cells)
            if highlight is not None and 0 <= highlight < len(self.x):
                shown = np.union1d(shown, [highlight])
        else:
            self._cells, shown = None, np.arange(len(self.x))
        self.shown = shown
        x, y = self.x[shown], self.y[shown]
        where = np.flatnonzero(shown == highlight) if highlight is not None else []
        if len(where):
            brushes = [solid_brush(colour)] * len(shown)
            sizes = np.full(len(shown), size, dtype=float)
            brushes[where[0]] = solid_brush(SELECTED)
            sizes[where[0]] = size * 2
            self.points.setData(x=x, y=y, brush=brushes, size=sizes)
        else:                 # one brush and size for all (no per-point lists to go through)
            self.points.setData(x=x, y=y, brush=solid_brush(colour), size=size)

    def _view_changed(self, *_) -> None:
        """Cut the points again when a pixel is another size (zoom, resize), not on a pan."""
        if self._cells is None:
            return
        cell_x, cell_y = self._pixel()
        old_x, old_y = self._cells
        if not (0.8 < cell_x / (old_x or 1e-300) < 1.25 and 0.8 < cell_y / (old_y or 1e-300) < 1.25):
            self._draw_points()

    def _nearest(self, x: float, y: float) -> Optional[int]:
        if not len(self.x):
            return None
        (x0, x1), (y0, y1) = self.plot.vb.viewRange()
        dx = (self.x - x) / ((x1 - x0) or 1.0)
        dy = (self.y - y) / ((y1 - y0) or 1.0)
        distance = dx * dx + dy * dy
        i = int(np.argmin(distance))
        return i if distance[i] < 0.03 ** 2 else None

    def hover_at(self, x: float, y: float) -> Optional[str]:
        i = self._nearest(x, y)
        if i is None:
            return None
        name = f"'{self.labels[i]}' " if self.labels is not None else ""
        return f"{i} {name}({format_value(float(self.x[i]))}, {format_value(float(self.y[i]))})"

    def token_at(self, x: float, y: float) -> Optional[int]:
        return self._nearest(x, y) if self.tokens else None
