"""A stage view built and drawn in turns of the session's frame scheduler: a view shown before
the idle builder made it is built a figure per turn (the placeholder saying so), then drawn, then
its colour bars made one per turn; after new data its figures repaint one per turn (FigureTurns),
so the window answers between them. An export (inline work) or a hidden view does all at once."""
from __future__ import annotations

import inspect
import weakref
from typing import Iterator, Optional

from shiboken6 import isValid

from ...state.frames import NOW
from ..frames import FigureTurns


class StageTurns:
    """The build steps a stage view (base.StageView) has left and the turns its figures repaint in. It holds the view
    weakly (the view owns it)."""

    def __init__(self, view, steps: Optional[Iterator]) -> None:
        self._view = weakref.ref(view)
        self.steps: Optional[Iterator] = steps if inspect.isgenerator(steps) else None
        self.figures = FigureTurns(view.session.frames)   # new data: a figure repaints per turn
        self.draw_after_build = False                     # shown unbuilt: drawn once built
        self.key = ("build view", id(view))

    def build_step(self) -> bool:
        """One more step of a build in steps; False when the view is built."""
        if self.steps is not None:
            if next(self.steps, StopIteration) is not StopIteration:
                return True
            self.steps = None
        return False

    def start_if_unbuilt(self) -> bool:
        """Shown unbuilt (a stage visited before the idle builder reached it): its figures and
        colour bars are made one per turn of the frame scheduler (~10 ms each, a view has up
        to a dozen: in one turn the window stalled 0.2-0.5 s), the placeholder saying so; then
        it draws. False when there is nothing left to build, or the view draws at once (an
        export) or unseen (hidden: the idle builder or a draw at once builds it)."""
        view = self._view()
        session = view.session
        frames = session.frames
        if (session.inline_work or frames is None or frames.closed or view.trace is None
                or not view.isVisible() or self.steps is None):
            return False
        view.show_placeholder("Drawing this stage…")
        self.draw_after_build = True
        frames.ensure(self.key, self._piece, NOW)
        return True

    def finish_soon(self) -> None:
        """Colour bars not made yet (Figure.finish): at once for an export, else one per turn
        while the view is shown."""
        view = self._view()
        if view.session.inline_work:
            view.finish_building()
            return
        frames = view.session.frames
        if (frames is not None and not frames.closed and view.isVisible()
                and not all(figure.finished for _, figure in view.figures())):
            frames.ensure(self.key, self._piece, NOW)

    def _piece(self) -> object:
        """One step of the build per turn; in the turn after the last, the drawing; then the
        colour bars, one per turn (the figures show meanwhile)."""
        view = self._view()
        # (left: built while idle, or when drawn)
        if view is None or not isValid(view) or not view.isVisible():
            return False
        if self.steps is not None:
            self.build_step()
            return True
        if self.draw_after_build:
            self.draw_after_build = False
            view.ensure_current()
            return True
        return view.finish_one()

    def paint_in_turns(self) -> None:
        """New data for every figure: they repaint one per event-loop turn (first in the order
        placed), not all in the turn that drew them. A hidden view (drawn ahead, or for an
        export) paints when shown or rendered."""
        view = self._view()
        if not view.session.inline_work and view.isVisible():
            self.figures.hold([figure for _, figure in view.figures()])

    def stop(self) -> None:
        """The view closes: its build and its figures' turns are dropped."""
        view = self._view()
        if view is not None and view.session.frames is not None:
            view.session.frames.cancel(self.key)
        self.figures.stop()
