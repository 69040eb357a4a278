"""Alt-click a value in any stage's plot: the provenance panel explains that very value (the
one the plot shows), copies Python that recomputes it, and follows the trace as the user types;
a plain click still selects a token."""
import re

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from transformer_stepper.core.model import stages
from transformer_stepper.ui.plots import Heatmap
from transformer_stepper.ui.interventions.provenance_panel import PANEL_WIDTH

ALT = Qt.KeyboardModifier.AltModifier
# figures whose cells show something derived from the explained value, not the value itself
DERIVED = {"contributions", "top_tokens", "top_per_position"}


def test_alt_click_on_a_score_explains_it_and_a_plain_click_still_selects(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    session.set_stage("scores")
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)       # (a view shown unbuilt draws in turns)
    heatmap = window.stepper.current_view().scores
    selected = session.selected_token
    assert not window.provenance_dock.isVisible()
    with qtbot.waitSignal(session.provenanceRequested):
        heatmap.click_at(1.0, 3.0, ALT)                       # query 3, key 1
    assert session.selected_token == selected                 # Alt-click selects nothing
    panel = window.provenance_panel
    e = panel.explanation
    assert (e.name, e.index) == ("scores", (session.layer, session.head, 3, 1))
    assert e.traced == pytest.approx(float(session.trace.layer("scores", session.layer)[session.head, 3, 1]))
    assert window.provenance_dock.isVisible()
    assert "q·k" in panel.body.toPlainText() and "✓" in panel.check.text()
    with qtbot.waitSignal(session.selectionChanged):
        heatmap.click_at(1.0, 2.0)                            # a plain click selects query 2
    assert session.selected_token == 2


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
def test_every_explained_cell_is_the_value_the_plot_shows(qtbot, loaded_window, kind):
    window = loaded_window(kind)
    session = window.session
    panel = window.provenance_panel
    config = session.model.config
    session.set_head(config.n_head - 1)
    session.set_layer(config.n_layer - 1)
    checked = 0
    for stage in stages.available_stages(config):
        session.set_stage(stage.key)
        view = window.stepper.current_view()
        qtbot.waitUntil(view.is_current, timeout=10_000)
        for name, figure in view.figures():
            if getattr(figure, "explain", None) is None or figure.isHidden():
                continue
            if isinstance(figure, Heatmap):
                height, width = figure.extent
                row, col = height - 1, width // 2
                shown = figure.value_at(row, col)
                x, y = col, row
            else:
                row, col = len(figure.values) - 1, 0
                shown = float(figure.values[row])
                x, y = (0.0, row) if figure.horizontal else (row, 0.0)
            with qtbot.waitSignal(session.provenanceRequested):
                figure.click_at(float(x), float(y), ALT)
            e = panel.explanation
            assert e is not None, (stage.key, name, panel.body.toPlainText())
            assert e.matches(), (stage.key, name)
            if name not in DERIVED and np.isfinite(shown):
                assert e.traced == pytest.approx(shown, rel=1e-6, abs=1e-6), (stage.key, name, e.name, e.index)
            checked += 1
    assert checked >= 15


def test_copy_as_python_recomputes_the_value_and_typing_re_explains(qtbot, loaded_window):
    window = loaded_window("llama")
    session = window.session
    panel = window.provenance_panel
    layer = session.model.config.n_layer - 1
    session.request_provenance("q", (layer, 1, 2, 3))          # rotated q, GQA
    panel.copy_python.click()
    snippet = QGuiApplication.clipboard().text()
    assert "rope_angles" in snippet
    scope = {"model": session.model, "trace": session.trace}
    exec(snippet, scope)
    assert float(scope["value"]) == pytest.approx(float(session.trace.layer("q", layer)[1, 2, 3]), abs=1e-5)
    before = panel.explanation.traced
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text("the river of the bank and money", immediate=True)
    assert panel.explanation.traced == pytest.approx(float(session.trace.layer("q", layer)[1, 2, 3]))
    assert panel.explanation.traced != before
    session.request_provenance("scores", (0, 0, 0, 99))        # outside the text: said, not raised
    assert panel.explanation is None and "not in this trace" in panel.body.toPlainText()


def _wrapped_numbers(browser) -> list[str]:
    """Numbers the dock's text browser breaks over two lines (at its width now)."""
    document = browser.document()
    document.size()                                    # laid out at the viewport's width
    wrapped = []
    block = document.begin()
    while block.isValid():
        text = block.text().strip()
        if re.fullmatch(r"[−\-]?[\d.e+\-]+", text) and block.layout().lineCount() > 1:
            wrapped.append(text)
        block = block.next()
    return wrapped


@pytest.mark.parametrize("size, least", [((1366, 768), 400), ((1600, 1000), PANEL_WIDTH)])
def test_the_dock_opens_wide_enough_that_no_number_wraps(qtbot, loaded_window, size, least):
    window = loaded_window("gpt2")
    window.resize(*size)
    qtbot.waitExposed(window)
    session, dock = window.session, window.provenance_dock
    layer = session.model.config.n_layer - 1
    session.request_provenance("scores", (layer, 1, 3, 2))
    qtbot.waitUntil(lambda: dock.width() >= least, timeout=2_000)
    assert window.width() == size[0]                   # room made inside the window
    body = window.provenance_panel.body
    assert body.toPlainText().count("\n") > 10          # a table of terms and steps
    assert _wrapped_numbers(body) == []
    # the check can fail: squeezed to 200 px (as it used to open), numbers break
    body.setFixedWidth(200)
    assert _wrapped_numbers(body) != []


def test_a_shorter_text_clears_an_explanation_its_trace_no_longer_has(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session, panel = window.session, window.provenance_panel
    last = session.trace.n_seq - 1
    session.request_provenance("attn_weights", (0, 1, last, 0))
    assert panel.explanation is not None
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text("the", immediate=True)
    text = panel.body.toPlainText()
    assert panel.explanation is None and "not in the new trace" in text, text
    assert "outside the shape" not in text and "Alt-click a value" in text
    assert not panel.copy_python.isEnabled()
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):     # and it stays cleared
        session.set_text("the bank of the river", immediate=True)
    assert panel.explanation is None
    session.request_provenance("attn_weights", (0, 1, 1, 0))       # a new click explains
    assert panel.explanation is not None and "✓" in panel.check.text()
