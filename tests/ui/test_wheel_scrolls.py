"""The mouse wheel over a plot is left to what holds it (a stage laid out as one scrolling column
on a laptop screen, a dock) and zooms the plot only with Ctrl held. (Qt passes a wheel event the
plot leaves on to its parents, up to the scroll area, only for the window system's own events:
so this checks what the plot does with it; the scrolling itself was checked under Xvfb.)"""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication


def wheel(figure, modifiers=Qt.KeyboardModifier.NoModifier) -> QWheelEvent:
    """One notch, at the middle of the figure's plotting area, as the window system sends it."""
    target = figure.viewport()
    box = figure.plot.vb.sceneBoundingRect().center()
    at = QPointF(figure.mapFromScene(box))
    event = QWheelEvent(at, QPointF(target.mapToGlobal(at.toPoint())), QPoint(0, 0), QPoint(0, -120),
                        Qt.MouseButton.NoButton, modifiers, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(target, event)
    return event


def test_a_plain_wheel_is_left_to_the_scroll_area_and_ctrl_wheel_zooms(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    session.set_stage("qkv")
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)
    figure = window.stepper.current_view().q
    shown = figure.plot.vb.viewRange()
    event = wheel(figure)
    assert not event.isAccepted(), "a plain wheel goes on to what holds the plot"
    assert figure.plot.vb.viewRange() == shown, "and leaves the plot's range alone"
    event = wheel(figure, Qt.KeyboardModifier.ControlModifier)
    assert event.isAccepted() and figure.plot.vb.viewRange() != shown, "Ctrl+wheel zooms the plot"
