"""Labelled points (tokens in a 2-D projection, pre- vs post-activation values); the nearest
point's label and exact coordinates on hover."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from .common import BAR_BRUSH, SELECTED, format_value, no_points_if_none_finite, solid_brush
from .figure import Figure


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

    def set_points(self, x: np.ndarray, y: np.ndarray, labels: Optional[Sequence[str]] = None,
                   highlight: Optional[int] = None, size: float = 6, alpha: int = 160) -> None:
        self.x, self.y = np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.float32)
        self.labels = list(labels) if labels is not None else None
        colour = QColor(BAR_BRUSH)
        colour.setAlpha(alpha)
        if no_points_if_none_finite(self.x, self.y):     # NaN/Inf everywhere: nothing to draw
            self.points.setData(x=[], y=[])
        elif highlight is not None and 0 <= highlight < len(self.x):
            brushes = [solid_brush(colour)] * len(self.x)
            sizes = np.full(len(self.x), size, dtype=float)
            brushes[highlight] = solid_brush(SELECTED)
            sizes[highlight] = size * 2
            self.points.setData(x=self.x, y=self.y, brush=brushes, size=sizes)
        else:                 # one brush and size for all (no per-point lists to go through)
            self.points.setData(x=self.x, y=self.y, brush=solid_brush(colour), size=size)
        self.plot.enableAutoRange()

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
