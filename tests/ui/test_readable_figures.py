"""Figures that can be read at 1366 x 768: titles that fit their plot, every bar of a short
chart labelled (the selected one always), legends off the data, and logit-lens words that read
on their cells and stay inside them."""
import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QFont, QFontMetrics, QFontMetricsF, QPainter, QPicture

from transformer_stepper.core.model import stages
from transformer_stepper.ui.plots import Bars
from transformer_stepper.ui.plots.cell_text import BLACK, WHITE, contrast, elide, inks, relative_luminance
from transformer_stepper.ui.plots.common import TITLE_POINTS
from transformer_stepper.ui.plots.figure import Figure
from transformer_stepper.ui.plots.heatmap import DIVERGING, SEQUENTIAL

from .conftest import LAPTOP, gpt2_laptop_window


def shown_views(qtbot, window):
    """(stage key, view) for every stage of the open model, each drawn in the window."""
    session = window.session
    for stage in stages.available_stages(session.model.config):
        session.set_stage(stage.key)
        view = window.stepper.current_view()
        qtbot.waitUntil(view.is_current, timeout=10_000)
        qtbot.wait(20)                      # laid out at the window's size
        yield stage.key, view


# ------------------------------------------------------------------------------ titles
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_every_title_fits_its_figure_at_1366x768(qtbot, loaded_window, kind):
    window = loaded_window(kind)
    window.resize(*LAPTOP)
    qtbot.waitExposed(window)
    font = QFont()
    font.setPointSize(TITLE_POINTS)
    metrics = QFontMetrics(font)
    checked = 0
    for key, view in shown_views(qtbot, window):
        for name, figure in view.figures():
            if not figure.isVisible():
                continue
            label = figure.title_label
            width = figure.plot.sceneBoundingRect().width() + 60      # the plot and its colour bar's margin
            room = figure.figure.geometry().width()
            for line in label.lines:
                assert metrics.horizontalAdvance(line) <= room, (key, name, line, room)
            shown = " ".join(label.lines)
            assert "…" not in shown, (key, name, label.full_text, shown)     # nothing cut off
            assert shown == label.full_text, (key, name)
            assert width > 0
            checked += 1
    assert checked >= 25


# ------------------------------------------------------------------------------ bars
@pytest.mark.parametrize("n, width", [(6, 420), (14, 420), (16, 300), (16, 700)])
def test_every_bar_of_a_short_chart_is_labelled_and_the_selected_one_whole(qtbot, n, width):
    figure = Bars("weights", "key", "weight")
    qtbot.addWidget(figure)
    figure.resize(width, 300)
    figure.show()
    qtbot.waitExposed(figure)
    labels = [f"token{i}" if i != 2 else "extraordinarily" for i in range(n)]
    figure.set_data(np.linspace(0.1, 1.0, n), labels, highlight=2)
    qtbot.wait(50)
    axis = figure.x_axis
    (x0, x1), _ = figure.plot.vb.viewRange()
    ticks = axis.tickValues(x0, x1, figure.plot.vb.width())
    shown = sorted(v for _, values in ticks for v in values)
    assert shown == list(range(n)), (n, width, shown)
    texts = axis.tickStrings(shown, 1, 1)
    assert all(texts), texts
    assert texts[2] == "extraordinarily"             # the selected bar's label is whole
    # and none of them is dropped when drawn: pyqtgraph leaves out a label that overhangs
    picture = QPicture()
    painter = QPainter(picture)
    painter.setFont(axis.style["tickFont"])
    drawn = axis.generateDrawSpecs(painter)
    painter.end()
    assert len(drawn[2]) == n, (n, width, [t for _, _, t in drawn[2]])


def test_too_many_bars_are_thinned_but_keep_the_selected_one(qtbot):
    figure = Bars("weights", "key", "weight")
    qtbot.addWidget(figure)
    figure.resize(300, 300)
    figure.show()
    qtbot.waitExposed(figure)
    figure.set_data(np.ones(120), [f"t{i}" for i in range(120)], highlight=77)
    qtbot.wait(50)
    (x0, x1), _ = figure.plot.vb.viewRange()
    shown = [v for _, values in figure.x_axis.tickValues(x0, x1, figure.plot.vb.width()) for v in values]
    assert 77 in shown and len(shown) < 120


# ------------------------------------------------------------------------------ legends
def _legend_covers_data(figure) -> list:
    """Data points (in scene coordinates) inside the figure's legend."""
    figure.scene().prepareForPaint()          # the auto-range pyqtgraph does before painting
    (x0, x1), _ = figure.plot.vb.viewRange()
    assert x1 - x0 > 2, "the plot is not ranged over its data"
    legend = next(i for i in figure.figure.scene().items() if isinstance(i, pg.LegendItem)
                  and i.isVisible() and i.items)
    rect = legend.sceneBoundingRect()
    inside = []
    for item in figure.plot.listDataItems():
        x, y = item.getData()
        if x is None or not item.isVisible():
            continue
        for xi, yi in zip(x, y):
            point = figure.plot.vb.mapViewToScene(QPointF(float(xi), float(yi)))
            if rect.contains(point):
                inside.append((xi, yi))
    return inside


def test_the_position_curves_legend_hides_no_position(qtbot, loaded_window):
    window = loaded_window("sinusoidal")
    window.resize(*LAPTOP)
    qtbot.waitExposed(window)
    window.session.set_stage("position_encoding")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    qtbot.wait(20)
    figure = dict(view.figures())["position_curves"]
    assert figure.plot.listDataItems()
    assert _legend_covers_data(figure) == []


def test_the_compare_cosine_legend_hides_no_curve(qtbot, loaded_window):
    window = loaded_window("gpt2")
    window.resize(*LAPTOP)
    window.tabs.show_tab("compare")
    compare = window.tabs.widget(window.tabs.currentIndex())
    qtbot.waitUntil(lambda: any(isinstance(f, Figure) and f.title.startswith("Cosine per layer")
                                and f.plot.listDataItems() for f in compare.findChildren(Figure)),
                    timeout=20_000)
    qtbot.wait(50)
    figure = next(f for f in compare.findChildren(Figure) if f.title.startswith("Cosine per layer"))
    assert _legend_covers_data(figure) == []


def test_a_legend_inside_the_plot_would_be_caught(qtbot, loaded_window):
    """The check above can fail: pyqtgraph's own legend, in the plot's corner, covers points."""
    window = loaded_window("sinusoidal")
    window.resize(*LAPTOP)
    window.session.set_stage("position_encoding")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    figure = dict(view.figures())["position_curves"]
    figure.legend.setVisible(False)
    inside = figure.plot.addLegend(offset=(6, 6))       # the top-left corner, where curves start
    for item in figure.plot.listDataItems():
        inside.addItem(item, "a long legend entry")
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(50)
    assert _legend_covers_data(figure) != []


# ------------------------------------------------------------------------------ cell words
@pytest.mark.parametrize("cmap", [SEQUENTIAL, pg.colormap.get(DIVERGING)])
def test_cell_ink_is_the_one_that_reads_on_every_colour_of_the_map(cmap):
    colours = np.asarray(cmap.map(np.linspace(0, 1, 101), mode="float"))[:, :3]
    chosen = inks(colours)
    luminance = relative_luminance(colours)
    ink = np.where(chosen == WHITE, 1.0, 0.0)
    assert (contrast(ink, luminance) >= 4.5).all()          # WCAG AA for normal text
    assert inks(np.array([1.0, 1.0, 1.0])) == BLACK and inks(np.array([0.03, 0.19, 0.42])) == WHITE
    # pale blue (p ≈ 0.3 of the sequential map), where white text used to vanish
    assert inks(SEQUENTIAL.map(np.array([0.3]), mode="float")[0][:3]) == BLACK


def test_elide_keeps_a_word_inside_its_cell(qtbot):
    font = QFont()
    font.setPointSize(8)
    metrics = QFontMetricsF(font)
    assert elide("river", metrics, 200) == "river"
    cut = elide("riverbank", metrics, 40)
    assert cut.endswith("…") and metrics.horizontalAdvance(cut) <= 40
    assert elide("riverbank", metrics, 8) == ""                  # not even 'r…': on hover only
    assert elide("abcdefghijklmnop", metrics, 1000, max_chars=8) == "abcdefg…"


def test_logit_lens_words_fit_their_cells_and_the_window_scrolls(qtbot, loaded_window):
    window = gpt2_laptop_window(qtbot, loaded_window, "the bank of the river was full of water and the money " * 3)
    session = window.session
    session.set_stage("logit_lens")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    qtbot.wait(50)
    table = view.table
    first, count, total = table.column_window()
    assert total == session.trace.n_seq and count < total     # a window, not a smear
    assert view.scroll.isVisible()
    assert first <= session.selected_token < first + count     # the selection is in view
    pixels = table.cell_pixels()
    assert pixels >= 40
    texts = [t for t in table._cell_texts if t.isVisible()]
    assert len(texts) == count * (session.model.config.n_layer + 1)
    metrics = QFontMetricsF(texts[0].textItem.font())
    for text in texts:
        assert metrics.horizontalAdvance(text.toPlainText()) <= pixels - 2, text.toPlainText()
    colours = table.cell_colours()
    for text in texts:
        col, row = int(round(text.pos().x())), int(round(text.pos().y()))
        ink = 1.0 if text.color.name() == WHITE else 0.0
        assert contrast(ink, relative_luminance(colours[row, col])) >= 4.5
    view.scroll.setValue(0)                                    # scrolled to the start
    assert table.column_window()[0] == 0 and table.visible_columns()[0] == 0


def test_a_wrapped_title_line_is_never_cut(qtbot):
    """Wrapping measures with horizontalAdvance, eliding with elidedText, which can measure a
    line a few pixels wider: a line that was just wrapped to fit came out as 'tir…'."""
    from transformer_stepper.ui.plots.title import wrap_lines
    font = QFont()
    font.setPointSize(TITLE_POINTS)
    metrics = QFontMetrics(font)
    text = "Nearest rows of E to 'tired' (cosine)"
    for width in range(60, metrics.horizontalAdvance(text) + 20):
        lines = wrap_lines(text, metrics, width, 3)
        whole = [line for line in lines if "…" not in line]
        if len(lines) < 3:                      # not cut for want of lines
            assert whole == lines, (width, lines)


@pytest.mark.parametrize("width", [1366, 1000])
def test_compare_read_words_overlap_neither_each_other_nor_the_sentence_tags(qtbot, loaded_window, width):
    """Compare's 'What each one read': the words above the bars were drawn over each other."""
    from transformer_stepper.ui.compare.figures import AttentionFigure
    window = loaded_window("gpt2")
    window.resize(width, 768)
    window.tabs.show_tab("compare")
    compare = window.tabs.widget(window.tabs.currentIndex())
    qtbot.waitExposed(window)

    def drawn():
        figures = compare.findChildren(AttentionFigure)
        return figures and figures[0].n_read > 0
    qtbot.waitUntil(drawn, timeout=20_000)
    qtbot.wait(100)
    figure = compare.findChildren(AttentionFigure)[0]
    figure.scene().prepareForPaint()
    shown = figure.shown_read_labels()
    assert shown                                   # the heaviest word is always named
    rects = [figure.text_rect(label) for label in shown]
    tags = [figure.text_rect(tag) for tag in figure.tags if tag.isVisible()]
    for i, rect in enumerate(rects):
        assert not any(rect.intersects(other) for other in rects[i + 1:] + tags), \
            [label.toPlainText() for label in shown]
