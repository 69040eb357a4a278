"""Words written in a heatmap's cells never overlap: the prediction table of a 58-token text (a
byte-level GGUF model) at a laptop's size wrote its cells' words over each other (rows lower
than a line of text)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QFontMetricsF

from transformer_stepper.ui.plots import Heatmap


@pytest.mark.parametrize("size, rows, cols", [((470, 450), 58, 5), ((700, 260), 10, 43),
                                             ((420, 400), 10, 43), ((1200, 700), 10, 43)])
def test_cell_words_stay_apart(qtbot, size, rows, cols):
    figure = Heatmap("Top tokens per position", "position", "rank", signed=False)
    qtbot.addWidget(figure)
    figure.resize(*size)
    figure.show()
    qtbot.waitExposed(figure)
    rng = np.random.default_rng(0)
    figure.set_data(rng.random((rows, cols)).astype(np.float32))
    names = [[rng.choice(["Ġthe", ",", "Ġbank", "ing", "Ġriver", ".", "ĠThe", "s"]) for _ in range(cols)]
             for _ in range(rows)]
    figure.set_cell_labels(names, limit=rows * cols)
    qtbot.wait(50)
    shown = [t for t in figure._cell_texts if t.isVisible() and t.textItem.toPlainText()]
    metrics = QFontMetricsF(figure._cell_font)

    def ink(text):                     # the glyphs' box (the item's own adds a margin of blank)
        centre = text.sceneBoundingRect().center()
        width, height = metrics.horizontalAdvance(text.textItem.toPlainText()), metrics.ascent()
        return QRectF(centre.x() - width / 2, centre.y() - height / 2, width, height)

    boxes = [ink(t) for t in shown]
    overlapping = [(a.textItem.toPlainText(), b.textItem.toPlainText())
                   for (a, box_a), (b, box_b) in itertools.combinations(zip(shown, boxes), 2)
                   if box_a.intersects(box_b)]
    assert overlapping == []
    if figure.row_pixels() >= metrics.height() and figure.cell_pixels() > 40:
        assert shown                   # where there is room, the words are written
