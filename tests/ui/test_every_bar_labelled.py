"""Every bar chart of at most 16 bars, in every stage of the built-in model and a Llama-style
model at 1366 x 768, draws a label under every bar (issue 24: 14 bars with 2 labels)."""
import pytest
from PySide6.QtGui import QPainter, QPicture

from tests.ui.conftest import builtin_model_or_skip
from tests.ui.test_readable_figures import LAPTOP, shown_views
from transformer_stepper.ui.plots import Bars
from transformer_stepper.ui.plots.common import MIN_TICK_PIXELS


def drawn_labels(axis) -> list[str]:
    picture = QPicture()
    painter = QPainter(picture)
    painter.setFont(axis.style["tickFont"])
    specs = axis.generateDrawSpecs(painter)
    painter.end()
    return [text for _, _, text in specs[2]] if specs else []


def short_charts_missing_labels(qtbot, window) -> tuple[list, int]:
    missing, checked = [], 0
    for key, view in shown_views(qtbot, window):
        for name, figure in view.figures():
            if not isinstance(figure, Bars) or figure.horizontal or not figure.isVisible():
                continue
            n = len(figure.values)
            if not 0 < n <= 16 or not figure.x_axis.labels:
                continue
            figure.scene().prepareForPaint()
            (x0, x1), _ = figure.plot.vb.viewRange()
            if figure.plot.vb.width() / (x1 - x0) < MIN_TICK_PIXELS:
                continue                # no room for a line of text per bar (a squeezed layout)
            shown = [t for t in drawn_labels(figure.x_axis) if t]
            checked += 1
            if len(shown) != n:
                missing.append((key, name, n, shown))
    return missing, checked


def test_every_short_bar_chart_of_the_builtin_model_is_labelled(qtbot, window):
    path = builtin_model_or_skip()
    window.resize(*LAPTOP)
    window.session.set_text("The queen rode to the bank of the river and she was tired", immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=20_000):
        window.open_model(str(path))
    qtbot.waitExposed(window)
    missing, checked = short_charts_missing_labels(qtbot, window)
    assert checked >= 5
    assert missing == []


@pytest.mark.parametrize("kind", ["llama"])
def test_every_short_bar_chart_of_a_llama_model_is_labelled(qtbot, loaded_window, kind):
    window = loaded_window(kind)
    window.resize(*LAPTOP)
    qtbot.waitExposed(window)
    missing, checked = short_charts_missing_labels(qtbot, window)
    assert checked >= 3
    assert missing == []
