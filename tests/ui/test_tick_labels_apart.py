"""Tick labels never run into each other ("0.20.40.60.8", "100200300"): at a laptop's 1280×720,
with the plots at their narrowest (the Questions dock open beside them), every axis of every plot
shown — each stage of layer 0 of an encoder and of a causal model, the Training and Positions
tabs — draws its tick labels in rectangles that do not overlap."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QImage, QPainter

from transformer_stepper.core.model import stages
from transformer_stepper.ui.plots.figure import Figure

from .conftest import HF_FIXTURES


def label_rects(axis: pg.AxisItem) -> list:
    """The rectangles the axis writes its tick labels in, as it would paint them now."""
    image = QImage(4, 4, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    if specs is None:
        return []
    return [(rect, text) for rect, _, text in specs[2] if text]


def overlaps(axis: pg.AxisItem) -> list[str]:
    rects = label_rects(axis)
    found = []
    for i, (a, text_a) in enumerate(rects):
        for b, text_b in rects[i + 1:]:
            # a pixel of slack: neighbours may touch, never overlap
            if a.adjusted(1, 1, -1, -1).intersects(b.adjusted(1, 1, -1, -1)):
                found.append(f"{text_a!r} and {text_b!r}")
    return found


def crowded(window, where: str) -> list[str]:
    problems = []
    for figure in window.findChildren(Figure):
        if not figure.isVisible():
            continue
        axes = [figure.plot.getAxis(side) for side in ("left", "bottom")]
        bar = getattr(figure, "_colorbar", None)
        if bar is not None:
            axes.append(bar.axis)
        for axis in axes:
            if axis.isVisible():
                problems += [f"{where}, '{figure.title}' {axis.orientation}: {pair}"
                             for pair in overlaps(axis)]
    return problems


def settle(qtbot, window) -> None:
    qtbot.waitUntil(lambda: window.stepper.settled() or window.tabs.currentIndex() != 0, timeout=20_000)
    qtbot.wait(30)       # the figures' legible minimums, then their layout


def test_no_tick_labels_overlap_at_1280x720(qtbot, window, loaded_window):
    window.resize(1280, 720)
    window.walk_panel.start(0)           # the Questions dock: the plots at their narrowest
    problems = []
    for model in ("gpt2", "bert_tiny_mlm"):
        if model == "gpt2":
            loaded_window(model)
        else:
            with qtbot.waitSignal(window.session.traceChanged, timeout=10_000):
                window.open_model(str(HF_FIXTURES / model))
        window.walk_panel.start(0) if not window.walk_panel.isVisible() else None
        session = window.session
        window.tabs.show_tab("stepper")
        session.set_layer(0)
        for stage in stages.available_stages(session.model.config):
            session.set_stage(stage.key)
            settle(qtbot, window)
            problems += crowded(window, f"{model}, {stage.key}")
    for tab in ("training", "positions"):
        window.tabs.show_tab(tab)
        qtbot.wait(300)
        problems += crowded(window, f"tab {tab}")
    assert problems == []
