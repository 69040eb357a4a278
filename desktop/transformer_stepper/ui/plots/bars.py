"""Bars, one per token (or per candidate token): the selected one drawn in the highlight colour,
the exact value on hover, a click selects the token."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg

from .bar_item import BarItem
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QWidget

from .common import BAR_BRUSH, MUTED, SELECTED, format_value, nearest_index, solid_brush
from .figure import Figure


class Bars(Figure):
    """Vertical bars at x = 0..n-1 labelled below, or horizontal bars at y = 0..n-1 labelled on
    the left (`horizontal=True`, best for ranked lists of long names). `tokens=True` means the
    bars are the text's tokens, so clicking one selects it."""

    def __init__(self, title: str, x_label: str = "", y_label: str = "", *,
                 horizontal: bool = False, tokens: bool = True, value_name: str = "value",
                 parent: Optional[QWidget] = None) -> None:
        super().__init__(title, x_label, y_label, parent)
        self.horizontal, self.tokens, self.value_name = horizontal, tokens, value_name
        self.values = np.zeros(0, dtype=np.float32)
        self.labels: list[str] = []
        self.notes: Optional[list[str]] = None
        self._base_brushes: list[QBrush] = []
        if horizontal:
            self.bars = BarItem(x0=[], y=[], height=0.75, width=[], brush=BAR_BRUSH, pen=None)
            self.plot.invertY(True)       # rank 1 on top
        else:
            self.bars = BarItem(x=[], height=[], width=0.75, brush=BAR_BRUSH, pen=None)
        self.plot.addItem(self.bars)
        self.zero_line = pg.InfiniteLine(pos=0, angle=90 if horizontal else 0, pen=pg.mkPen("#666"))
        self.plot.addItem(self.zero_line)

    def set_data(self, values: np.ndarray, labels: Sequence[str], highlight: Optional[int] = None,
                 muted: Optional[np.ndarray] = None, notes: Optional[Sequence[str]] = None,
                 value_range: Optional[tuple[float, float]] = None, label_axis: bool = True) -> None:
        """`muted` (bool per bar) greys bars out (masked keys, special tokens); `notes` add a
        line per bar to the hover text; `label_axis=False` keeps a numeric axis (dimensions)."""
        self.values = np.asarray(values, dtype=np.float32)
        self.labels = list(labels)
        self.notes = list(notes) if notes is not None else None
        n = len(self.values)
        positions = np.arange(n)
        brushes = [solid_brush(BAR_BRUSH)] * n
        if muted is not None:
            grey = solid_brush(MUTED)
            brushes = [grey if m else b for m, b in zip(muted, brushes)]
        self._base_brushes = list(brushes)
        brushes = list(brushes)
        if highlight is not None and 0 <= highlight < n:
            brushes[highlight] = solid_brush(SELECTED)
        self._emphasise(highlight)
        heights = np.nan_to_num(self.values, nan=0.0, neginf=0.0, posinf=0.0)
        if self.horizontal:
            self.bars.setOpts(x0=np.zeros(n), y=positions, width=heights, brushes=brushes)
            self.y_axis.set_labels(self.labels if label_axis else None)
        else:
            self.bars.setOpts(x=positions, height=heights, brushes=brushes)
            self.x_axis.set_labels(self.labels if label_axis else None)
        low, high = (min(0.0, float(heights.min(initial=0))), max(0.0, float(heights.max(initial=0))))
        if value_range is not None:
            low, high = value_range
        if high <= low:
            high = low + 1.0
        span = (-0.6, max(n, 1) - 0.4)
        pad = 0.05 * (high - low)
        if self.horizontal:
            self.plot.setRange(yRange=span, xRange=(low - (pad if low < 0 else 0), high + pad), padding=0)
        else:
            self.plot.setRange(xRange=span, yRange=(low - (pad if low < 0 else 0), high + pad), padding=0)

    def set_highlight(self, index: Optional[int]) -> None:
        """Recolour only (cheap): the bars keep their data."""
        n = len(self.values)
        base = list(self._base_brushes)
        if index is not None and 0 <= index < n:
            base[index] = solid_brush(SELECTED)
        self.bars.setOpts(brushes=base)
        self._emphasise(index)

    def _emphasise(self, highlight: Optional[int]) -> None:
        """Always name the selected bar and the largest one, whatever else is thinned out."""
        finite = np.where(np.isfinite(self.values), np.abs(self.values), -np.inf)
        largest = int(np.argmax(finite)) if len(finite) else None
        axis = self.y_axis if self.horizontal else self.x_axis
        axis.set_emphasis([highlight, largest])

    def index_at(self, x: float, y: float) -> Optional[int]:
        return nearest_index(y if self.horizontal else x, len(self.values))

    def hover_at(self, x: float, y: float) -> Optional[str]:
        i = self.index_at(x, y)
        if i is None:
            return None
        text = f"{i}: '{self.labels[i]}'  {self.value_name} = {format_value(float(self.values[i]))}"
        if self.notes is not None and self.notes[i]:
            text += f"\n{self.notes[i]}"
        return text

    def token_at(self, x: float, y: float) -> Optional[int]:
        return self.index_at(x, y) if self.tokens else None

    def cell_at(self, x: float, y: float) -> Optional[tuple[int, int]]:
        i = self.index_at(x, y)
        return None if i is None else (i, 0)
