"""The Training tab's legends cover nothing: the PCA map's legend sat over points and over the
"Press Train" sentence, the loss legend over the "unigram baseline" label. Both are now under
their plots, in the figure (and so in its export)."""
from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QWidget

from transformer_stepper.ui.training.figures import EmbeddingMap, LossFigure


def test_the_legends_are_outside_the_plots(qtbot):
    holder = QWidget()                          # (the figures' show() draws a training frame)
    qtbot.addWidget(holder)
    layout = QHBoxLayout(holder)
    losses, embedding = LossFigure(), EmbeddingMap()
    layout.addWidget(losses)
    layout.addWidget(embedding)
    holder.resize(900, 340)                     # a laptop's Training tab
    holder.show()
    qtbot.waitExposed(holder)
    qtbot.wait(30)
    for figure in (losses, embedding):
        legend, box = figure.legend, figure.plot.vb.sceneBoundingRect()
        assert legend.isVisible() and legend.scene() is figure.scene()
        assert not legend.sceneBoundingRect().intersects(box)
        assert legend in figure.ci.items                 # exported with the figure
    assert not embedding.empty.sceneBoundingRect().intersects(embedding.legend.sceneBoundingRect())
    assert len(embedding.legend.items) >= 6 and len(losses.legend.items) == 2
    assert embedding.plot.vb.width() > 150 and embedding.plot.vb.height() > 110
