"""The Training view's figures: the loss, E's rows on a 2-D map coloured by word class, the
last step's gradient on E by route (lookup / tied head), and the class separation. Items are
created once and fed new arrays every frame."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg

from ..plots.bar_item import BarItem
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from ...core.training.corpus import WORD_CLASSES
from ..plots.common import MUTED, SELECTED, format_value
from ..plots.figure import Figure

CLASS_COLOURS = {"people": "#d62728", "pronouns": "#ff7f0e", "verbs": "#2ca02c",
                 "places": "#1f77b4", "ambiguous": "#9467bd", "function words": "#7f7f7f",
                 "descriptions": "#17becf", "things": "#bcbd22", "special": "#000000"}
TRAIN_COLOUR = QColor("#9ecae1")
HELDOUT_COLOUR = QColor("#d62728")


def legend_below(figure: Figure, columns: int) -> pg.LegendItem:
    """A legend in the figure's own layout under its plot (exported with it), over no data."""
    legend = pg.LegendItem(labelTextSize="8pt", colCount=columns)
    figure.ci.addItem(legend, row=2, col=0)
    return legend


class LossFigure(Figure):
    """Training loss at every step, held-out loss at intervals, the unigram baseline."""

    def __init__(self) -> None:
        super().__init__("1. Loss: training (every step) and held-out", "step", "loss (nats/token)")
        self.train = self.plot.plot([], [], pen=pg.mkPen(TRAIN_COLOUR, width=1))
        self.heldout = self.plot.plot([], [], pen=pg.mkPen(HELDOUT_COLOUR, width=2), symbol="o",
                                      symbolSize=5, symbolBrush=HELDOUT_COLOUR, symbolPen=None)
        # the legend under the plot: inside it sat over the "unigram baseline" label
        self.legend = legend_below(self, 2)
        self.legend.addItem(self.train, "training (batch)")
        self.legend.addItem(self.heldout, "held-out")
        self.baseline = pg.InfiniteLine(angle=0, pen=pg.mkPen("#444", width=1.5, style=Qt.PenStyle.DashLine),
                                        label="unigram baseline", labelOpts={"position": 0.85, "color": "#444"})
        self.baseline.setVisible(False)
        self.plot.addItem(self.baseline)
        self.by_tokens = False
        self._data: Optional[tuple] = None

    def set_axis(self, by_tokens: bool) -> None:
        self.by_tokens = by_tokens
        self.set_axis_labels("tokens seen" if by_tokens else "step")
        if self._data is not None:
            self.show(*self._data)

    def show(self, frame) -> None:
        self._data = (frame,)
        x = frame.train_tokens if self.by_tokens else frame.train_steps
        self.train.setData(x, frame.train_losses)
        hx = frame.heldout_tokens if self.by_tokens else frame.heldout_steps
        self.heldout.setData(hx, frame.heldout_losses)
        self.baseline.setVisible(bool(np.isfinite(frame.unigram_loss)))
        if np.isfinite(frame.unigram_loss):
            self.baseline.setValue(frame.unigram_loss)
        self.plot.enableAutoRange()

    def hover_at(self, x: float, y: float) -> Optional[str]:
        if self._data is None:
            return None
        frame = self._data[0]
        xs = frame.train_tokens if self.by_tokens else frame.train_steps
        if not len(xs):
            return None
        i = int(np.argmin(np.abs(xs - x)))
        text = f"step {frame.train_steps[i]} ({frame.train_tokens[i]:,} tokens): training loss {frame.train_losses[i]:.4f}"
        if len(frame.heldout_steps):
            j = int(np.argmin(np.abs(frame.heldout_steps - frame.train_steps[i])))
            text += f"; held-out at step {frame.heldout_steps[j]}: {frame.heldout_losses[j]:.4f}"
        return text + f"; unigram baseline {frame.unigram_loss:.4f}"


EMPTY_MAP = "Press Train: every row of E appears here as a point,\nstarting random and moving as it learns."


class EmbeddingMap(Figure):
    """Every row of E as a point (2-D PCA), coloured by the word's class; chosen words labelled."""

    def __init__(self) -> None:
        super().__init__("2. The embedding table E: every row, 2-D PCA", "PC 1", "PC 2")
        self.points = pg.ScatterPlotItem(size=7, pen=pg.mkPen("#ffffff", width=0.5))
        self.plot.addItem(self.points)
        self.plot.setAspectLocked(True)
        # the legend under the map: inside it covered points and the "Press Train" sentence
        legend = self.legend = legend_below(self, 4)
        for name in WORD_CLASSES:
            if name != "special":
                sample = pg.ScatterPlotItem(size=8, pen=None, brush=pg.mkBrush(CLASS_COLOURS[name]))
                legend.addItem(sample, name)
        self.words: list[str] = []
        self.classes: list[str] = []
        self.coords = np.zeros((0, 2))
        self.brushes: list = []
        self.labelled: dict[int, pg.TextItem] = {}
        self.extent = 0.0
        # before a run there are no rows to place: a sentence says so (and no labels pile up)
        self.empty = pg.TextItem(EMPTY_MAP, color="#555", anchor=(0.5, 0.5))
        self.plot.addItem(self.empty)
        self.plot.setRange(xRange=(-1, 1), yRange=(-1, 1), padding=0)

    def set_vocabulary(self, words: Sequence[str], classes: Sequence[str], labelled: Sequence[str]) -> None:
        self.words, self.classes = list(words), list(classes)
        self.brushes = [pg.mkBrush(CLASS_COLOURS[c]) for c in self.classes]
        self.extent = 0.0
        self.set_labelled(labelled)

    def set_labelled(self, labelled: Sequence[str]) -> None:
        for item in self.labelled.values():
            self.plot.removeItem(item)
        self.labelled = {}
        for word in labelled:
            if word in self.words:
                item = pg.TextItem(word, color="#111", anchor=(0, 1))
                item.setVisible(len(self.coords) > 0)        # placed with the first rows
                self.plot.addItem(item)
                self.labelled[self.words.index(word)] = item
        if len(self.coords):
            self._place_labels()

    def show(self, coords: np.ndarray, title: str, grow_only: bool = True) -> None:
        self.coords = np.asarray(coords, dtype=np.float64)
        self.empty.setVisible(False)
        self.set_title(title)
        keep = [c != "special" for c in self.classes]
        shown = self.coords[keep]
        self.points.setData(x=shown[:, 0], y=shown[:, 1],
                            brush=[b for b, k in zip(self.brushes, keep) if k])
        self._shown_ids = np.flatnonzero(keep)
        self._place_labels()
        extent = float(np.abs(shown).max()) * 1.08 if len(shown) else 1.0
        # the view only grows while training, so a row that moves is seen to move
        self.extent = max(self.extent, extent) if grow_only else extent
        self.plot.setRange(xRange=(-self.extent, self.extent), yRange=(-self.extent, self.extent),
                           padding=0)

    def _place_labels(self) -> None:
        for i, item in self.labelled.items():
            item.setPos(*self.coords[i])
            item.setVisible(True)

    def hover_at(self, x: float, y: float) -> Optional[str]:
        if not len(self.coords):
            return None
        ids = self._shown_ids
        (x0, x1), (y0, y1) = self.plot.vb.viewRange()
        distance = ((self.coords[ids, 0] - x) / (x1 - x0)) ** 2 + ((self.coords[ids, 1] - y) / (y1 - y0)) ** 2
        k = int(np.argmin(distance))
        if distance[k] > 0.03 ** 2:
            return None
        i = int(ids[k])
        return (f"id {i} '{self.words[i]}' ({self.classes[i]}): "
                f"({format_value(self.coords[i, 0])}, {format_value(self.coords[i, 1])})")


class GradientStrip(Figure):
    """‖row of dL/dE‖ over the vocabulary for one route; the batch's ids marked below."""

    def __init__(self, title: str, colour: str, marks: bool) -> None:
        super().__init__(title, "token id", "‖gradient row‖")
        self.bars = BarItem(x=[], height=[], width=0.8, brush=pg.mkBrush(colour), pen=None)
        self.plot.addItem(self.bars)
        self.marks = pg.ScatterPlotItem(size=5, symbol="t1", pen=None, brush=pg.mkBrush(SELECTED)) if marks else None
        if self.marks is not None:
            self.plot.addItem(self.marks)
        self.norms = np.zeros(0)
        self.in_batch = np.zeros(0, dtype=bool)
        self.words: list[str] = []
        self.setMinimumHeight(110)

    def show(self, norms: np.ndarray, batch_ids: np.ndarray, words: Sequence[str]) -> None:
        self.norms = np.asarray(norms, dtype=np.float64)
        self.words = list(words)
        self.in_batch = np.zeros(len(self.norms), dtype=bool)
        self.in_batch[batch_ids] = True
        self.bars.setOpts(x=np.arange(len(self.norms)), height=self.norms)
        top = float(self.norms.max()) if len(self.norms) else 1.0
        if self.marks is not None:
            self.marks.setData(x=batch_ids.astype(float), y=np.full(len(batch_ids), -0.06 * top))
        self.plot.setXRange(-1, len(self.norms), padding=0)
        self.plot.setYRange(-0.1 * top, top * 1.05 or 1.0, padding=0)

    def hover_at(self, x: float, y: float) -> Optional[str]:
        i = int(round(x))
        if not 0 <= i < len(self.norms):
            return None
        where = "in the batch" if self.in_batch[i] else "not in the batch"
        return f"id {i} '{self.words[i]}' ({where}): ‖grad row‖ = {format_value(self.norms[i])}"


class SeparationFigure(Figure):
    """Mean cosine within a word class minus across classes, per snapshot of E."""

    def __init__(self) -> None:
        super().__init__("5. Structure: cosine within class − across classes", "step", "separation")
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#2ca02c", width=2), symbol="o", symbolSize=4,
                                    symbolBrush="#2ca02c", symbolPen=None)
        self.cursor = pg.InfiniteLine(angle=90, pen=pg.mkPen(SELECTED, width=1.5))
        self.cursor.setVisible(False)
        self.plot.addItem(self.cursor)
        self.plot.addItem(pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen(MUTED)))
        self.steps = np.zeros(0)
        self.values = np.zeros(0)

    def show(self, steps: np.ndarray, values: np.ndarray, cursor: Optional[int] = None) -> None:
        self.steps, self.values = np.asarray(steps), np.asarray(values)
        self.curve.setData(self.steps, self.values)
        self.cursor.setVisible(cursor is not None)
        if cursor is not None:
            self.cursor.setValue(cursor)
        self.plot.enableAutoRange()

    def hover_at(self, x: float, y: float) -> Optional[str]:
        if not len(self.steps):
            return None
        i = int(np.argmin(np.abs(self.steps - x)))
        return f"step {self.steps[i]}: within − across = {self.values[i]:.4f}"
