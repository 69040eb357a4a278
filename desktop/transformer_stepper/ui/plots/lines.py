"""Several named curves over a shared x (positions, dimensions, layers), with a legend; the
nearest point's exact value on hover. Curves are created once and re-fed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QSizePolicy, QWidget

from .common import PALETTE, cache_on_screen, format_value
from .figure import Figure


@dataclass
class Curve:
    """One line; or, with a 2-D `y` ([k, n]), a bundle of k lines in one pen drawn as one item
    (`rows` names each for the hover): 32 tokens' lines made as 32 items took ~0.2 s of the GUI
    thread in one turn, as one item a few ms."""
    name: str
    y: np.ndarray
    x: Optional[np.ndarray] = None      # default 0..n-1
    color: object = None
    width: float = 1.8
    step: bool = False                  # a histogram: x holds len(y)+1 bin edges
    fill: bool = False
    rows: Optional[Sequence[str]] = None     # a bundle's line names

    @property
    def lines(self) -> list[tuple[str, np.ndarray]]:
        """(name, y) of each line: one, or a bundle's rows."""
        y = np.asarray(self.y)
        if y.ndim == 1:
            return [(self.name, y)]
        names = list(self.rows) if self.rows is not None else [self.name] * len(y)
        return list(zip(names, y))


def bundle_xy(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A bundle's k lines ([k, n] over x [n]) as one polyline broken by NaN after each line
    (drawn with connect="finite")."""
    k, n = y.shape
    xs = np.empty((k, n + 1), dtype=np.float64)
    ys = np.empty((k, n + 1), dtype=np.float64)
    xs[:, :n], xs[:, n] = x, np.nan
    ys[:, :n], ys[:, n] = y, np.nan
    return xs.ravel(), ys.ravel()


def beside_legend(figure: Figure, columns: int = 1, below: bool = False,
                  text_size: str = "9pt") -> pg.LegendItem:
    """A legend in the figure's layout, right of the plot and top-aligned (or `below` it, in
    `columns` columns): never over a curve (inside the plot it hid whatever ran through its
    corner)."""
    legend = pg.LegendItem(labelTextSize=text_size, verSpacing=-6, colCount=columns)
    # as tall as its entries, at the top: the row would otherwise spread them out
    legend.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
    if below:
        figure.ci.addItem(legend, row=2, col=0, colspan=2)
        figure.ci.layout.setAlignment(legend, Qt.AlignmentFlag.AlignHCenter)
    else:
        figure.ci.addItem(legend, row=1, col=1)
        figure.ci.layout.setAlignment(legend, Qt.AlignmentFlag.AlignTop)
        # the plot takes what is left: the legend's column is as wide as its entries
        figure.ci.layout.setColumnStretchFactor(0, 1)
        figure.ci.layout.setColumnStretchFactor(1, 0)
    return legend


class Lines(Figure):
    def __init__(self, title: str, x_label: str = "", y_label: str = "", *,
                 legend: bool = True, tokens_on_x: bool = False,
                 parent: Optional[QWidget] = None) -> None:
        super().__init__(title, x_label, y_label, parent)
        self.tokens_on_x = tokens_on_x
        # below the plot: beside it, long entries left a narrow figure's plot a sliver
        self.legend = beside_legend(self, below=True) if legend else None
        self.items: list[pg.PlotDataItem] = []
        self.curves: list[Curve] = []
        self.x_labels: Optional[list[str]] = None
        self._named: list[tuple[int, str]] = []     # (curve index, name) in the legend

    def _item(self, i: int) -> pg.PlotDataItem:
        while len(self.items) <= i:
            item = pg.PlotDataItem(antialias=True)
            cache_on_screen(item.curve)
            self.plot.addItem(item)
            self.items.append(item)
        return self.items[i]

    def set_curves(self, curves: Sequence[Curve], x_labels: Optional[Sequence[str]] = None,
                   y_range: Optional[tuple[float, float]] = None) -> None:
        self.curves = list(curves)
        self.x_labels = list(x_labels) if x_labels is not None else None
        named = [(i, curve.name) for i, curve in enumerate(self.curves) if curve.name]
        relabel = self.legend is not None and named != self._named
        if relabel:                        # (the same names: the entries show the new pens)
            self.legend.clear()
            self._named = named
            self.legend.setColumnCount(self._legend_columns([name for _, name in named]))
        for i, curve in enumerate(self.curves):
            item = self._item(i)
            x = np.arange(np.shape(curve.y)[-1]) if curve.x is None else curve.x
            color = curve.color if curve.color is not None else PALETTE[i % len(PALETTE)]
            pen = pg.mkPen(color, width=curve.width)
            if np.ndim(curve.y) == 2:
                bx, by = bundle_xy(np.asarray(x), np.asarray(curve.y))
                item.setData(bx, by, stepMode=None, fillLevel=None, pen=pen, connect="finite")
            elif curve.step:
                item.setData(x, curve.y, stepMode="center", fillLevel=0 if curve.fill else None,
                             brush=pg.mkBrush(pg.mkColor(color).lighter(170)) if curve.fill else None,
                             pen=pen, connect="auto")
            else:
                item.setData(x, curve.y, stepMode=None, fillLevel=None, pen=pen, connect="auto")
            item.setVisible(True)
            if relabel and curve.name:
                self.legend.addItem(item, curve.name)
        for item in self.items[len(self.curves):]:
            item.setData([], [])
            item.setVisible(False)
        self.x_axis.set_labels(self.x_labels)
        # auto-range only the axes not set here: turning an axis's auto-range on and then
        # setting it ranges every curve once more first (33 curves: ~7 ms)
        x_set, y_set = self.x_labels is not None, y_range is not None
        if not x_set:
            self.plot.enableAutoRange(axis="x")
        if not y_set:
            self.plot.enableAutoRange(axis="y")
        if x_set:                          # whole labels at both ends
            self.plot.setXRange(-0.8, len(self.x_labels) - 0.2, padding=0, update=not y_set)
        if y_set:
            self.plot.setYRange(*y_range, padding=0.02)

    def _legend_columns(self, names: list[str]) -> int:
        """As many columns (up to 4) as fit the figure's width."""
        if not names:
            return 1
        font = QFont()
        font.setPointSize(9)
        entry = max(QFontMetrics(font).horizontalAdvance(name) for name in names) + 40   # + sample
        return max(1, min(4, len(names), int(0.9 * max(self.width(), 300) // entry)))

    def hover_at(self, x: float, y: float) -> Optional[str]:
        best = None
        view_range = self.plot.vb.viewRange()
        y_span = (view_range[1][1] - view_range[1][0]) or 1.0
        for curve in self.curves:
            xs = np.arange(np.shape(curve.y)[-1]) if curve.x is None else np.asarray(curve.x)
            if curve.step:
                centres = 0.5 * (xs[:-1] + xs[1:])
                j = int(np.clip(np.searchsorted(xs, x) - 1, 0, len(curve.y) - 1))
                distance = abs(float(curve.y[j]) - y) / y_span if len(curve.y) else np.inf
                candidate = (distance, f"{curve.name}: {centres[j]:.3g} → {format_value(float(curve.y[j]))}")
                if best is None or candidate[0] < best[0]:
                    best = candidate
                continue
            if not len(xs):
                continue
            j = int(np.argmin(np.abs(xs - x)))
            where = self._x_name(xs[j])
            for name, ys in curve.lines:
                distance = abs(float(ys[j]) - y) / y_span
                candidate = (distance, f"{name}: {where} → {format_value(float(ys[j]))}")
                if best is None or candidate[0] < best[0]:
                    best = candidate
        return best[1] if best is not None else None

    def _x_name(self, x: float) -> str:
        i = int(round(x))
        if self.x_labels is not None and 0 <= i < len(self.x_labels):
            return f"{i} '{self.x_labels[i]}'"
        return f"{x:.6g}"

    def token_at(self, x: float, y: float) -> Optional[int]:
        if not self.tokens_on_x or self.x_labels is None:
            return None
        i = int(round(x))
        return i if 0 <= i < len(self.x_labels) else None
