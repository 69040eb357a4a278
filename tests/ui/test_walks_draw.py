"""Every step of every guided walk, on the built-in model, in the window: once the step's caption
is shown, every plot on screen has been drawn (a caption names plots of the tab it shows: an
empty one there is a step that does not show what it says); the translator step's window has
its alignment; the training step's own run fills the Training tab's plots."""
import numpy as np
import pyqtgraph as pg

from transformer_stepper.ui.plots.figure import Figure

from .conftest import builtin_model_or_skip

TIMEOUT = 60_000
TRAINING_TIMEOUT = 240_000     # the walk's own run, on a shared machine


def _has_data(item) -> bool:
    if isinstance(item, pg.ImageItem):
        return item.image is not None and item.image.size > 0 and bool(np.isfinite(item.image).any())
    if isinstance(item, (pg.PlotDataItem, pg.PlotCurveItem)):
        x = item.xData if isinstance(item, pg.PlotDataItem) else item.xData
        return x is not None and len(x) > 0
    if isinstance(item, pg.BarGraphItem):
        return any(item.opts.get(k) is not None and len(np.atleast_1d(item.opts.get(k))) > 0
                   for k in ("height", "width"))
    if isinstance(item, pg.ScatterPlotItem):
        return len(item.data) > 0
    return False


def drawn(figure: Figure) -> bool:
    return any(_has_data(item) for item in figure.plot.items)


def empty_figures(widget) -> list[str]:
    return [figure.title_label.text or type(figure).__name__ for figure in widget.findChildren(Figure)
            if figure.isVisible() and not drawn(figure)]


def _caption_ready(qtbot, panel):
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.index == panel.index
                    and panel.caption.text() == panel.shown.caption, timeout=TIMEOUT)


def test_every_step_of_every_walk_draws_its_plots(qtbot, window):
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        window.open_model(str(builtin_model_or_skip()))
    panel = window.walk_panel
    window.questions_action.trigger()
    for number, walk in enumerate(panel.walks):
        panel.start(number)
        for index in range(len(walk.steps)):
            panel.go(index)
            _caption_ready(qtbot, panel)
            assert not panel.caption.text().startswith("⚠"), (walk.key, index, panel.caption.text())
            tab = window.tabs.view(window.tabs.current_key())
            wait = TRAINING_TIMEOUT if walk.steps[index].state.train else TIMEOUT
            where = (walk.key, index, walk.steps[index].title)
            try:
                qtbot.waitUntil(lambda: tab.isVisible() and not empty_figures(tab), timeout=wait)
            except qtbot.TimeoutError:
                pass
            assert tab.isVisible() and not empty_figures(tab), (where, empty_figures(tab))
            if walk.steps[index].state.translator:
                translator = window.translations.windows[-1]
                qtbot.waitUntil(lambda: translator.trace is not None
                                and translator.trace.decoder.n_seq > 1, timeout=TIMEOUT)
                qtbot.waitUntil(lambda: not empty_figures(translator.cross_view), timeout=TIMEOUT)
                assert "Cross-attention" in translator.explanation.toPlainText()
    training = window.tabs.view("training")
    if training.running:
        training.stop()
        qtbot.waitUntil(lambda: not training.running, timeout=TIMEOUT)
    window.translations.close_all()
