"""Every bar chart survives its plot menu: pyqtgraph's BarGraphItem counted as a curve, so the
menu's Plot Options → Alpha (PlotItem.updateAlpha) and PlotItem.restoreState called setAlpha on
it, which it lacks (an AttributeError found by random UI actions). Every bar item in the app is a
BarItem (ui/plots/bar_item.py), and every plot holding bars takes the menu's options."""
from __future__ import annotations

import pyqtgraph as pg
import pytest

from transformer_stepper.core.model import stages
from transformer_stepper.ui.plots.bar_item import BarItem
from transformer_stepper.ui.tabs import TABS


def _plots_with_bars(window) -> list:
    found = []
    for plot in window.findChildren(pg.GraphicsView):
        scene = plot.scene()
        if scene is None:
            continue
        for item in scene.items():
            if isinstance(item, pg.PlotItem) and any(isinstance(i, pg.BarGraphItem) for i in item.items):
                found.append(item)
    return found


@pytest.mark.parametrize("kind", ["gpt2"])
def test_every_bar_chart_takes_the_plot_menu_options(qtbot, loaded_window, kind):
    window = loaded_window(kind)
    session = window.session
    for stage in stages.STAGES:
        if stage.available(session.model.config):
            session.set_stage(stage.key)
            qtbot.waitUntil(window.stepper.current_view().is_current, timeout=10_000)
    for tab in TABS:
        window.tabs.show_tab(tab.key)
    plots = _plots_with_bars(window)
    assert len(plots) >= 8
    for plot in plots:
        bars = [i for i in plot.items if isinstance(i, pg.BarGraphItem)]
        assert all(isinstance(b, BarItem) for b in bars), plot
        assert not any(b in plot.curves for b in bars)
        plot.ctrl.alphaGroup.setChecked(True)             # Plot Options → Alpha
        plot.ctrl.autoAlphaCheck.setChecked(False)
        plot.ctrl.alphaSlider.setValue(500)
        plot.updateAlpha()
        plot.restoreState(plot.saveState())
        plot.ctrl.alphaGroup.setChecked(False)


def test_a_bar_item_takes_the_curve_calls():
    bars = BarItem(x=[0, 1], height=[1, 2], width=0.5)
    plot = pg.PlotItem()
    plot.addItem(bars)
    bars.setAlpha(0.25, False)
    assert bars.opacity() == pytest.approx(0.25)
    bars.setAlpha(0.25, True)
    assert bars.opacity() == 1.0
    plot.restoreState(plot.saveState())
