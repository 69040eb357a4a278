"""Bars made of signed segments: one bar per row of values [n_bars, n_segments]; in each bar
the positive segments are stacked up from 0 and the negative ones down, so a bar's height above
and below zero shows what pushed up and what pushed down; a black tick marks the bar's net sum.
Each segment kind has its colour in every bar (a legend names them); hover names the segment
under the cursor and its exact value."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg

from .bar_item import BarItem
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QSizePolicy, QWidget

from .common import format_value, nearest_index
from .figure import Figure

BAR_WIDTH = 0.7
LEGEND_LIMIT = 12           # more segment kinds than this: the legend names the first and last


class StackedBars(Figure):
    def __init__(self, title: str, x_label: str = "", y_label: str = "", *, value_name: str = "value",
                 parent: Optional[QWidget] = None) -> None:
        super().__init__(title, x_label, y_label, parent)
        self.value_name = value_name
        self.values = np.zeros((0, 0))
        self.bar_labels: list[str] = []
        self.segment_names: list[str] = []
        self.bottoms = np.zeros((0, 0))          # [n_bars, n_segments] where each segment starts
        # beside the plot, not over the bars (the tallest bar is often the last one)
        side = self.ci.addLayout(row=1, col=1)
        self.legend = pg.LegendItem(labelTextSize="9pt")
        side.addItem(self.legend, row=0, col=0)
        side.layout.setRowStretchFactor(1, 1)          # the legend at the top, at its own height
        side.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)   # and width
        self.ci.layout.setColumnStretchFactor(0, 1)
        self.items: list[pg.BarGraphItem] = []
        self.zero_line = pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen("#666"))
        self.plot.addItem(self.zero_line)
        self.net = pg.ScatterPlotItem(symbol="_", size=22, pen=pg.mkPen("#000", width=2.5),
                                      brush=pg.mkBrush("#000"))
        self.net.setZValue(10)
        self.plot.addItem(self.net)

    def _item(self, k: int) -> pg.BarGraphItem:
        while len(self.items) <= k:
            item = BarItem(x=[], y0=[], height=[], width=BAR_WIDTH, pen=pg.mkPen("#fff", width=0.5))
            self.plot.addItem(item)
            self.items.append(item)
        return self.items[k]

    def set_data(self, values: np.ndarray, bar_labels: Sequence[str], segment_names: Sequence[str],
                 colors: Sequence[object]) -> None:
        values = np.nan_to_num(np.asarray(values, dtype=np.float64))
        n_bars, n_segments = values.shape
        self.values, self.bar_labels, self.segment_names = values, list(bar_labels), list(segment_names)
        positive, negative = np.maximum(values, 0), np.minimum(values, 0)
        # each segment starts where the ones before it (of its sign) end
        up = np.cumsum(positive, axis=1) - positive
        down = np.cumsum(negative, axis=1) - negative
        self.bottoms = np.where(values >= 0, up, down)
        x = np.arange(n_bars)
        heads = [k for k, name in enumerate(self.segment_names) if name.startswith("head")]
        named = set(range(n_segments)) if n_segments <= LEGEND_LIMIT else \
            set(range(n_segments)) - set(heads[1:-1])          # many heads: the first and last
        self.legend.clear()
        for k in range(max(n_segments, len(self.items))):
            item = self._item(k)
            if k >= n_segments:
                item.setVisible(False)
                continue
            item.setOpts(x=x, y0=self.bottoms[:, k], height=values[:, k], brush=QColor(colors[k]))
            item.setVisible(True)
            if k in named:
                self.legend.addItem(item, segment_names[k])
        totals = values.sum(axis=1)
        drawn = np.isfinite(totals)            # a NaN total is not drawn (corrupt weights)
        self.net.setData(x=x[drawn], y=totals[drawn])
        self.x_axis.set_labels(self.bar_labels)
        high = float(positive.sum(axis=1).max(initial=0.0))
        low = float(negative.sum(axis=1).min(initial=0.0))
        pad = 0.06 * max(high - low, 1e-9)
        self.plot.setRange(xRange=(-0.6, max(n_bars, 1) - 0.4), yRange=(low - pad, high + 3 * pad), padding=0)

    def segment_at(self, x: float, y: float) -> Optional[tuple[int, Optional[int]]]:
        """(bar, segment under the cursor or None) at data point (x, y)."""
        bar = nearest_index(x, len(self.values))
        if bar is None or abs(x - bar) > BAR_WIDTH / 2:
            return None
        for k, (start, height) in enumerate(zip(self.bottoms[bar], self.values[bar])):
            if height != 0 and min(start, start + height) <= y <= max(start, start + height):
                return bar, k
        return bar, None

    def hover_at(self, x: float, y: float) -> Optional[str]:
        found = self.segment_at(x, y)
        if found is None:
            return None
        bar, k = found
        row = self.values[bar]
        total = f"{self.bar_labels[bar]}: Σ = {format_value(float(row.sum()))} " \
                f"(up {format_value(float(row[row > 0].sum()))}, down {format_value(float(row[row < 0].sum()))})"
        if k is None:
            return total
        return f"{self.bar_labels[bar]} · {self.segment_names[k]}: {self.value_name} = " \
               f"{format_value(float(row[k]))}\n{total}"

    def cell_at(self, x: float, y: float) -> Optional[tuple[int, int]]:
        found = self.segment_at(x, y)
        return None if found is None or found[1] is None else (found[0], found[1])
