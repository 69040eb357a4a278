"""Figures with new data repaint one per event-loop turn, not all in the turn that fed them.

A stage view's figures take 30–60 ms to repaint at 512 tokens; painted together after the
redraw, the window answered nothing for that long. Held (their updates off) until their turn,
each repaints in a turn of its own and the window answers in between (input, timers). A figure
may also leave slow numbers to its turn (`draw_later`: histograms of 786k values)."""
from __future__ import annotations

from typing import Callable, Optional

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget
from shiboken6 import isValid

from .timers import one_shot


TURN_MS = 4


class PaintTurns(QObject):
    def __init__(self, parent: Optional[QObject] = None) -> None:
        super().__init__(parent)
        self._held: list[list] = []         # [figure, what it draws in its turn or None]
        # a timer, so the events already waiting go first (the last figure's paint); a few ms,
        # so timers that fell due meanwhile go first too (a 0 ms one is due at once, and runs
        # before them in the turn after the paint)
        self._next = one_shot(self, TURN_MS, self._release_one)

    def hold(self, figures) -> None:
        """Hold these figures' repaints until their turns, first in the order given.
        (Not figure.updatesEnabled(): a stack switching views has every child's updates off
        for the moment; a held figure's own stay off until its turn.)"""
        for figure in figures:
            if not any(figure is held for held, _ in self._held):
                figure.setUpdatesEnabled(False)
                self._held.append([figure, None])
        if self._held:
            self._next.start()

    def draw_later(self, figure: QWidget, draw: Callable[[], None]) -> bool:
        """`draw()` in `figure`'s turn, just before it repaints; False when the figure is not
        held (the caller draws now)."""
        for entry in self._held:
            if entry[0] is figure:
                entry[1] = draw
                return True
        return False

    def draw_waiting(self) -> None:
        """What the held figures still have to draw, drawn now (they keep their turns)."""
        for entry in self._held:
            draw, entry[1] = entry[1], None
            if draw is not None:
                draw()

    def pending(self) -> bool:
        """Figures still wait for their turn (or the last one's turn is not over)."""
        return bool(self._held) or self._next.isActive()

    def stop(self) -> None:
        self._next.stop()

    def _release_one(self) -> None:
        """The next held figure draws what it waits to and repaints; hidden ones are let go
        in the same turn (they paint when shown). A turn after the last one, none is left."""
        while self._held:
            figure, draw = self._held.pop(0)
            if not isValid(figure):
                continue
            if draw is not None:
                draw()
            # what pyqtgraph leaves for the paint (auto-range, the view's transform) done now:
            # changed during the paint, it would ask for a second paint in the next turn
            figure.scene().prepareForPaint()
            figure.setUpdatesEnabled(True)          # (repaints it; a hidden one costs nothing)
            if figure.isVisible():
                self._next.start()
                return
