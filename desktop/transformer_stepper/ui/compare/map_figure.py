"""4. The map: every ordinary token of the sentences projected to 2-D at each hidden state (PCA
fitted per state), small multiples side by side; the compared tokens drawn large, one colour
per sentence. A click on a point compares that token of its sentence."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Signal
from PySide6.QtGui import QColor

from ...core.compare import Comparison
from ..plots.common import Figure, format_value
from .figures import sentence_colour

PANEL_TITLE_SIZE = "9pt"
CURRENT_BORDER = pg.mkPen("#888", width=1.5)
OTHER_BORDER = pg.mkPen("#ddd")


def grid_shape(n: int) -> tuple[int, int]:
    """(rows, columns) for n panels: landscape (columns >= rows, at most twice), fewest empty
    cells, then fewest columns. 4 -> 2x2, 7 -> 2x4, 13 -> 3x5."""
    best = None
    for columns in range(max(1, math.ceil(math.sqrt(n))), n + 1):
        rows = math.ceil(n / columns)
        if columns > 2 * rows and columns > 2:
            break
        key = (rows * columns - n, columns)
        if best is None or key < best[0]:
            best = (key, (rows, columns))
    return best[1] if best else (1, 1)


class Panel:
    """One hidden state's scatter: faint points for the pool, large ones for the occurrences."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self.plot = plot
        for side in ("left", "bottom"):
            plot.hideAxis(side)
        plot.hideButtons()
        plot.setMenuEnabled(False)
        plot.vb.setBorder(OTHER_BORDER)
        self.pool = pg.ScatterPlotItem(size=5, pen=None)
        self.marks = pg.ScatterPlotItem(size=13, pen=pg.mkPen("#111", width=1.2))
        plot.addItem(self.pool)
        plot.addItem(self.marks)
        self.tags: list[pg.TextItem] = []

    def draw(self, title: str, coords: np.ndarray, brushes: list, occurrence_pool: np.ndarray,
             mark_brushes: list, tags: list[tuple[str, QColor]]) -> None:
        self.plot.setTitle(title, size=PANEL_TITLE_SIZE, color="#333")
        self.pool.setData(x=coords[:, 0], y=coords[:, 1], brush=brushes)
        marked = coords[occurrence_pool] if len(occurrence_pool) else np.zeros((0, 2))
        self.marks.setData(x=marked[:, 0], y=marked[:, 1], brush=mark_brushes)
        while len(self.tags) < len(tags):
            tag = pg.TextItem(anchor=(-0.15, 0.5))
            self.plot.addItem(tag)
            self.tags.append(tag)
        for tag, (text, colour), point in zip(self.tags, tags, marked):
            tag.setText(text, color=colour)
            tag.setPos(float(point[0]), float(point[1]))
            tag.setVisible(True)
        for tag in self.tags[len(tags):]:
            tag.setVisible(False)
        self.plot.enableAutoRange()


class MapFigure(Figure):
    pointClicked = Signal(int, int)          # sentence index (in Comparison.sentences), token

    def __init__(self) -> None:
        super().__init__("Map of the hidden states (PCA per state)")
        self.ci.removeItem(self.plot)        # the panels take its place
        self.plot.hide()
        self.panels: list[Panel] = []
        self.grid: Optional[pg.GraphicsLayout] = None
        self.comparison: Optional[Comparison] = None
        self._panel: Optional[int] = None    # the panel under the mouse
        self.tokenClicked.connect(self._clicked)

    def _build(self, n_states: int) -> None:
        if len(self.panels) == n_states:
            return
        if self.grid is not None:
            self.ci.removeItem(self.grid)
        self.grid = pg.GraphicsLayout()
        self.grid.setSpacing(2)
        self.ci.addItem(self.grid, row=1, col=0, colspan=2)
        rows, columns = grid_shape(n_states)
        self.panels = []
        for s in range(n_states):
            self.panels.append(Panel(self.grid.addPlot(row=s // columns, col=s % columns)))

    def draw(self, comparison: Comparison, layer: int) -> None:
        self.comparison = comparison
        self._build(comparison.n_states)
        pool_colours = [sentence_colour(comparison.sentences[s].number) for s in comparison.pool_sentence]
        brushes = []
        for colour in pool_colours:
            faint = QColor(colour)
            faint.setAlpha(110)
            brushes.append(pg.mkBrush(faint))
        mark_brushes = [pg.mkBrush(sentence_colour(o.number)) for o in comparison.occurrences]
        tags = [(f"S{o.number}", sentence_colour(o.number)) for o in comparison.occurrences]
        for s, panel in enumerate(self.panels):
            explained = comparison.map_explained[s]
            title = f"{comparison.state_names[s]} ({100 * explained.sum():.0f}%)"
            panel.draw(title, comparison.map_coords[s], brushes, comparison.occurrence_pool,
                       mark_brushes, tags)
        self.mark_state(layer + 1)
        self.set_title("Map of every word, PCA per hidden state (% variance kept); "
                       "large: the compared tokens")

    def mark_state(self, state: int) -> None:
        """Frame the panel of the hidden state the toolbar's layer outputs."""
        for s, panel in enumerate(self.panels):
            panel.plot.vb.setBorder(CURRENT_BORDER if s == state else OTHER_BORDER)

    # -- mouse ---------------------------------------------------------------------------------
    def _data_point(self, scene_pos) -> Optional[QPointF]:
        self._panel = None
        for s, panel in enumerate(self.panels):
            view = panel.plot.vb
            if view.sceneBoundingRect().contains(scene_pos):
                self._panel = s
                return view.mapSceneToView(scene_pos)
        return None

    def _nearest(self, x: float, y: float) -> Optional[int]:
        c, s = self.comparison, self._panel
        if c is None or s is None or not len(c.pool_sentence):
            return None
        coords = c.map_coords[s]
        (x0, x1), (y0, y1) = self.panels[s].plot.vb.viewRange()
        distance = ((coords[:, 0] - x) / ((x1 - x0) or 1)) ** 2 + ((coords[:, 1] - y) / ((y1 - y0) or 1)) ** 2
        i = int(np.argmin(distance))
        return i if distance[i] < 0.05 ** 2 else None

    def hover_at(self, x: float, y: float) -> Optional[str]:
        i = self._nearest(x, y)
        if i is None:
            return None
        c = self.comparison
        sentence = c.sentences[int(c.pool_sentence[i])]
        point = c.map_coords[self._panel, i]
        compared = " (compared)" if i in c.occurrence_pool else ""
        return (f"{c.state_names[self._panel]}: S{sentence.number} token {c.pool_position[i]} "
                f"'{c.pool_pieces[i]}'{compared}  PC1 {format_value(float(point[0]))}, "
                f"PC2 {format_value(float(point[1]))}")

    def token_at(self, x: float, y: float) -> Optional[int]:
        return self._nearest(x, y)

    def _clicked(self, i: int) -> None:
        c = self.comparison
        if c is not None and 0 <= i < len(c.pool_sentence):
            self.pointClicked.emit(int(c.pool_sentence[i]), int(c.pool_position[i]))
