"""5. Nearest words: for each compared token (columns) at each hidden state (rows), the tokens
of the sentences closest to it by cosine, written in their sentence's colour; the cell's
shade is the best cosine."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFont

from ...core.analysis.compare import Comparison, piece_text
from ..plots import Heatmap
from ..plots.common import format_value, nearest_index
from .figures import sentence_colour, short_states

LIGHT = pg.ColorMap(pos=[0.0, 1.0], color=["#ffffff", "#9ecae1"], name="light blues")
CELL_FONT_POINTS = 8
WORD_CHARS = 9
LINE_PIXELS = 14            # one line of cell text, with its leading
WIDE_CELL_PIXELS = 78       # narrower cells show the words without their cosines (hover has them)


def _short(word: str) -> str:
    return word if len(word) <= WORD_CHARS else word[: WORD_CHARS - 1] + "…"


class NearestFigure(Heatmap):
    def __init__(self) -> None:
        super().__init__("Nearest words", "compared token", "hidden state", signed=False,
                         value_label="best cosine", row_names="state", col_names="token", click=None)
        self.colorbar.setColorMap(LIGHT)
        self.cells: list[pg.TextItem] = []
        self.cell_lines: list[list[tuple[str, str]]] = []
        self.comparison: Optional[Comparison] = None
        self.font = QFont()
        self.font.setPointSize(CELL_FONT_POINTS)

    def draw(self, comparison: Comparison) -> None:
        self.comparison = comparison
        n_occ, n_states = len(comparison.occurrences), comparison.n_states
        if not n_occ:
            return
        best = comparison.nearest_cosines[:, :, 0].T                     # [n_states, n_occ]
        self.set_data(np.nan_to_num(best, nan=0.0), short_states(comparison.state_names),
                      [o.label for o in comparison.occurrences], levels=(0.0, 1.0),
                      describe=self._describe)
        needed = n_occ * n_states
        while len(self.cells) < needed:
            cell = pg.TextItem(anchor=(0.5, 0.5))
            cell.setFont(self.font)
            self.plot.addItem(cell)
            self.cells.append(cell)
        k = comparison.nearest.shape[2]
        self.cell_lines = []
        for s in range(n_states):
            for o in range(n_occ):
                lines = []
                for r in range(k):
                    i = int(comparison.nearest[o, s, r])
                    if i < 0:
                        continue
                    number = comparison.sentences[int(comparison.pool_sentence[i])].number
                    colour = sentence_colour(number).name()
                    word = _short(piece_text(comparison.pool_pieces[i]))
                    lines.append((f'<span style="color:{colour}">{_html(word)}</span>',
                                  f' <span style="color:#555">{comparison.nearest_cosines[o, s, r]:.2f}</span>'))
                self.cell_lines.append(lines)
                self.cells[s * n_occ + o].setPos(o, s)
        for cell in self.cells[needed:]:
            cell.setVisible(False)
        self._fill_cells()
        self.set_title(f"Nearest words (top {k}; the word itself left out)")

    def _fill_cells(self) -> None:
        """As many words per cell as its height holds on screen (all of them off screen: the
        headless export lays the figure out at its own size)."""
        c = self.comparison
        if c is None or not self.cell_lines:
            return
        k = c.nearest.shape[2]
        cell_height = self.plot.vb.height() / max(c.n_states, 1)
        cell_width = self.plot.vb.width() / max(len(c.occurrences), 1)
        fits = int(cell_height // LINE_PIXELS) if self.isVisible() else k
        fits = max(1, min(fits, k))
        numbers = not self.isVisible() or cell_width >= WIDE_CELL_PIXELS   # else words only
        for cell, lines in zip(self.cells, self.cell_lines):
            shown = [word + (value if numbers else "") for word, value in lines[:fits]]
            html = '<div style="text-align:center">' + "<br>".join(shown) + "</div>"
            if getattr(cell, "shown_html", None) != html:      # laying out HTML is the cost
                cell.setHtml(html)
                cell.shown_html = html
            cell.setVisible(True)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if hasattr(self, "cell_lines"):      # pyqtgraph resizes during construction
            self._fill_cells()               # (cells whose text is unchanged are left alone)

    def _describe(self, row: int, col: int) -> str:
        c = self.comparison
        if c is None or col >= len(c.occurrences) or row >= c.n_states:
            return ""
        neighbours = []
        for r in range(c.nearest.shape[2]):
            i = int(c.nearest[col, row, r])
            if i >= 0:
                number = c.sentences[int(c.pool_sentence[i])].number
                neighbours.append(f"'{c.pool_pieces[i]}' (S{number} token {c.pool_position[i]}, "
                                  f"cos {format_value(float(c.nearest_cosines[col, row, r]))})")
        return f"{c.state_names[row]}, {c.occurrences[col].label}: " + (", ".join(neighbours) or "none")

    def hover_at(self, x: float, y: float) -> Optional[str]:
        height, width = self.extent
        row, col = nearest_index(y, height), nearest_index(x, width)
        return None if row is None or col is None else self._describe(row, col)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
