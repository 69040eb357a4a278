"""4. The map: every ordinary token of the sentences projected to 2-D at each hidden state (PCA
fitted per state), small multiples side by side; the compared tokens drawn large, one colour
per sentence (the strips' colours; hover names a point). A click on a point compares that
token of its sentence.

The panels are cells of one plot (each state's points scaled into its own square), so an edit
feeds one scatter item instead of one per panel: drawing and painting 13 panels costs what one
does."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtGui import QColor

from ...core.analysis.compare import MAX_SENTENCES, Comparison
from ..plots.common import format_value
from ..plots.figure import Figure
from .figures import sentence_colour, short_states

GAP = 0.08                    # between panels, in panel widths
MARGIN = 0.07                 # inside each panel, around its points (the title sits top left)
PANEL_FONT_POINTS = 8
TITLE_FILL = pg.mkBrush(255, 255, 255, 190)
FRAME_PEN = pg.mkPen("#d0d0d0", width=1)
CURRENT_PEN = pg.mkPen("#777", width=2)
MARK_PEN = pg.mkPen("#111", width=1.2)


def grid_shape(n: int, aspect: float = 4 / 3) -> tuple[int, int]:
    """(rows, columns) for n square panels in an area `aspect` times wider than tall: the
    largest panels, then the fewest empty cells. 4 in 4:3 -> 2x2, 4 in 3:1 -> 1x4, 7 -> 2x4."""
    best = None
    for columns in range(1, n + 1):
        rows = math.ceil(n / columns)
        side = min(aspect / (columns * (1 + GAP)), 1 / (rows * (1 + GAP)))
        key = (-round(side, 6), rows * columns - n)
        if best is None or key < best[0]:
            best = (key, (rows, columns))
    return best[1] if best else (1, 1)


def _brushes(alpha: int) -> list:
    # one brush per sentence colour, made once: the scatter's symbol atlas caches by object,
    # so shared brushes are drawn from one cached pixmap each
    brushes = []
    for number in range(1, MAX_SENTENCES + 1):
        colour = QColor(sentence_colour(number))
        colour.setAlpha(alpha)
        brushes.append(pg.mkBrush(colour))
    return brushes


FAINT = _brushes(110)
SOLID = _brushes(255)


def fit_unit_square(coords: np.ndarray) -> np.ndarray:
    """[n, 2] -> [n, 2] inside [0, 1]² with a margin for the markers, the same scale on both
    axes (distances stay comparable), centred."""
    finite = np.isfinite(coords).all(axis=-1)     # NaN rows (corrupt weights) stay NaN: not drawn
    if not finite.any():
        return coords
    low, high = coords[finite].min(axis=0), coords[finite].max(axis=0)
    span = float(max(high - low)) or 1.0
    return (coords - (low + high) / 2) / span * (1 - 2 * MARGIN) + 0.5


class MapFigure(Figure):
    pointClicked = Signal(int, int)          # sentence index (in Comparison.sentences), token

    def __init__(self) -> None:
        super().__init__("Map of the hidden states (PCA per state)")
        for side in ("left", "bottom"):
            self.plot.hideAxis(side)
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(False, False)
        self.plot.vb.setAspectLocked(True)
        self.frames = pg.PlotCurveItem(pen=FRAME_PEN, connect="finite")
        self.current = pg.PlotCurveItem(pen=CURRENT_PEN)
        self.pool = pg.ScatterPlotItem(size=5, pen=None)
        self.marks = pg.ScatterPlotItem(size=13, pen=MARK_PEN)
        for item in (self.frames, self.current, self.pool, self.marks):
            self.plot.addItem(item)
        self.titles: list[pg.TextItem] = []
        self.shape = (0, 0)
        self._laid_out = 0
        self._state = 0                          # the hidden state framed
        self.comparison: Optional[Comparison] = None
        self.placed = np.zeros((0, 0, 2))        # [n_states, n_pool, 2] plot coordinates
        self.tokenClicked.connect(self._clicked)

    def origin(self, state: int) -> tuple[float, float]:
        """The lower-left corner of a state's panel (row 0 on top)."""
        rows, columns = self.shape
        row, column = divmod(state, columns)
        return column * (1 + GAP), (rows - 1 - row) * (1 + GAP)

    def _aspect(self) -> float:
        # the plot area's shape on screen; off screen (an export) the export's 4:3
        width, height = self.width() - 10, self.height() - 36      # less the title's row
        return width / height if self.isVisible() and width > 20 and height > 20 else 4 / 3

    def _layout(self, n_states: int) -> bool:
        """Arrange the panels for the figure's shape. -> whether anything moved."""
        shape = grid_shape(n_states, self._aspect())
        if shape == self.shape and self._laid_out == n_states:
            return False
        self.shape, self._laid_out = shape, n_states
        font = pg.QtGui.QFont()
        font.setPointSize(PANEL_FONT_POINTS)
        while len(self.titles) < n_states:
            title = pg.TextItem(color="#333", anchor=(0, 0), fill=TITLE_FILL)
            title.setFont(font)
            title.setZValue(5)
            self.plot.addItem(title)
            self.titles.append(title)
        for title in self.titles[n_states:]:
            title.setVisible(False)
        xs, ys = [], []
        for s in range(n_states):
            x0, y0 = self.origin(s)
            xs += [x0, x0 + 1, x0 + 1, x0, x0, np.nan]
            ys += [y0, y0, y0 + 1, y0 + 1, y0, np.nan]
            self.titles[s].setPos(x0, y0 + 1)
            self.titles[s].setVisible(True)
        self.frames.setData(np.array(xs), np.array(ys))
        rows, columns = shape
        self.plot.vb.setRange(xRange=(-0.02, columns * (1 + GAP) - GAP + 0.02),
                              yRange=(-0.02, rows * (1 + GAP) - GAP + 0.02), padding=0)
        return True

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        comparison = getattr(self, "comparison", None)
        if comparison is not None and self._layout(comparison.n_states):
            self.draw(comparison, self._state - 1)

    def draw(self, comparison: Comparison, layer: int) -> None:
        self.comparison = comparison
        n_states = comparison.n_states
        self._layout(n_states)
        placed = np.empty((n_states, len(comparison.pool_sentence), 2))
        for s in range(n_states):
            placed[s] = fit_unit_square(comparison.map_coords[s]) + self.origin(s)
        self.placed = placed
        numbers = np.array([s.number for s in comparison.sentences], dtype=np.int64)
        pool_colour = (numbers[comparison.pool_sentence] - 1) % MAX_SENTENCES
        flat = placed.reshape(-1, 2)
        drawn = np.isfinite(flat).all(axis=-1)
        brushes = [FAINT[c] for c in pool_colour] * n_states
        self.pool.setData(x=flat[drawn, 0], y=flat[drawn, 1], brush=[b for b, d in zip(brushes, drawn) if d])
        marks = placed[:, comparison.occurrence_pool].reshape(-1, 2)
        colours = [SOLID[(o.number - 1) % MAX_SENTENCES] for o in comparison.occurrences] * n_states
        drawn = np.isfinite(marks).all(axis=-1)
        self.marks.setData(x=marks[drawn, 0], y=marks[drawn, 1], brush=[c for c, d in zip(colours, drawn) if d])
        names = short_states(comparison.state_names)
        for s in range(n_states):
            text = f"{names[s]} {100 * comparison.map_explained[s].sum():.0f}%"
            if self.titles[s].toPlainText() != text:
                self.titles[s].setText(text, color="#333")
        self.mark_state(layer + 1)
        self.set_title("Map of every word, PCA per hidden state (% of variance shown); "
                       "large: the compared tokens")

    def mark_state(self, state: int) -> None:
        """Frame the panel of the hidden state the toolbar's layer outputs."""
        self._state = state
        if self.comparison is None or not 0 <= state < self.comparison.n_states:
            self.current.setData([], [])
            return
        x0, y0 = self.origin(state)
        self.current.setData([x0, x0 + 1, x0 + 1, x0, x0], [y0, y0, y0 + 1, y0 + 1, y0])

    # -- mouse ---------------------------------------------------------------------------------
    def panel_at(self, x: float, y: float) -> Optional[int]:
        if self.comparison is None:
            return None
        for s in range(self.comparison.n_states):
            x0, y0 = self.origin(s)
            if x0 <= x <= x0 + 1 and y0 <= y <= y0 + 1:
                return s
        return None

    def _nearest(self, x: float, y: float) -> Optional[tuple[int, int]]:
        s = self.panel_at(x, y)
        if s is None or not self.placed.shape[1]:
            return None
        distance = np.hypot(self.placed[s, :, 0] - x, self.placed[s, :, 1] - y)
        i = int(np.argmin(distance))
        return (s, i) if distance[i] < 0.04 else None

    def hover_at(self, x: float, y: float) -> Optional[str]:
        found = self._nearest(x, y)
        if found is None:
            return None
        s, i = found
        c = self.comparison
        sentence = c.sentences[int(c.pool_sentence[i])]
        point = c.map_coords[s, i]
        compared = " (compared)" if i in c.occurrence_pool else ""
        return (f"{c.state_names[s]}: S{sentence.number} token {c.pool_position[i]} "
                f"'{c.pool_pieces[i]}'{compared}  PC1 {format_value(float(point[0]))}, "
                f"PC2 {format_value(float(point[1]))}")

    def token_at(self, x: float, y: float) -> Optional[int]:
        found = self._nearest(x, y)
        return None if found is None else found[1]

    def _clicked(self, i: int) -> None:
        c = self.comparison
        if c is not None and 0 <= i < len(c.pool_sentence):
            self.pointClicked.emit(int(c.pool_sentence[i]), int(c.pool_position[i]))
