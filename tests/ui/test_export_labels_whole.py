"""An export is laid out for its own size: token labels the screen shows whole are whole in a 2x
export of the default 800 x 600 figure too (written upwards where they do not fit across),
not cut to 'princ…' as an axis narrower than the screen's cut them."""
from __future__ import annotations

import numpy as np

from transformer_stepper.ui.export.render import DEFAULT_SIZE, ExportOptions, render_png
from transformer_stepper.ui.plots import Bars

LABELS = ["[SEP]", "princess", "[CLS]", "the", "river", "bank", "prince", "queen", "money", "water",
          "[SEP]", "boat", "she", "was"]


def test_a_2x_export_keeps_the_labels_whole(qtbot):
    figure = Bars("Token ids", "token", "id")
    qtbot.addWidget(figure)
    figure.resize(1000, 300)                      # wider on screen than the export
    figure.show()
    qtbot.waitExposed(figure)
    figure.set_data(np.arange(len(LABELS), dtype=np.float32) + 1, LABELS, 3)
    qtbot.wait(20)
    assert sorted(figure.x_axis._texts.items()) == list(enumerate(LABELS))     # whole on screen
    image = render_png(figure.figure, ExportOptions(format="png", scale=2.0))
    assert (image.width(), image.height()) == (2 * DEFAULT_SIZE[0], 2 * DEFAULT_SIZE[1])
    drawn = dict(figure.x_axis._texts)            # the labels as the export laid them out
    assert drawn == dict(enumerate(LABELS))
