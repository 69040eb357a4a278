"""The frame scheduler (state/frames.py) on the session's WorkerPool, whose timers are QTimers;
idle work also waits while a mouse button is down (a drag, a slider). And FigureTurns: a
stage view's figures with new data repaint one per turn, as one NOW task of that scheduler.

A view's figures take 30–60 ms to repaint at 512 tokens; painted together after the redraw,
the window answered nothing for that long. Held (their updates off) until their turn, each
repaints in a turn of its own and the window answers in between (input, timers). A figure may
also leave slow numbers to its turn (`draw_later`: the feed-forward histograms' curves)."""
from __future__ import annotations

import weakref
from typing import Callable, Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QWidget
from shiboken6 import isValid

from ..state.frames import NOW, FrameScheduler
from ..state.scheduler import Scheduler


class Frames(FrameScheduler):
    """The window's frame scheduler: one per session, on the session's scheduler."""

    def __init__(self, scheduler: Scheduler, session) -> None:
        session_ref = weakref.ref(session)       # (the session keeps this: no cycle through it)

        def busy() -> bool:
            live = session_ref()
            return ((live is not None and live.busy)
                    or QApplication.mouseButtons() != Qt.MouseButton.NoButton)

        super().__init__(scheduler, busy=busy)


class FigureTurns:
    """Figures holding their repaints until their turns (one NOW task of `frames`, keyed by
    this object); without frames (a view that draws at once: an export) nothing is held."""

    def __init__(self, frames: Optional[FrameScheduler]) -> None:
        self.frames = frames
        self._held: list[list] = []         # [figure, what it draws in its turn or None]
        self._key = ("figure turns", id(self))

    def hold(self, figures) -> None:
        """Hold these figures' repaints until their turns, first in the order given.
        (Not figure.updatesEnabled(): a stack switching views has every child's updates off
        for the moment; a held figure's own stay off until its turn.)"""
        if self.frames is None or self.frames.closed:
            return
        for figure in figures:
            if not any(figure is held for held, _ in self._held):
                figure.setUpdatesEnabled(False)
                self._held.append([figure, None])
        if self._held:
            self.frames.ensure(self._key, self._release_one, NOW)

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
        return self.frames is not None and self.frames.pending(self._key)

    def stop(self) -> None:
        """The view closes: its turns are dropped (the figures go with it)."""
        if self.frames is not None:
            self.frames.cancel(self._key)
        self._held.clear()

    def _release_one(self) -> bool:
        """The next held figure draws what it waits to and repaints; hidden ones are let go
        in the same turn (they paint when shown). False a turn after the last one (its paint
        is done by then)."""
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
                return True
        return False
