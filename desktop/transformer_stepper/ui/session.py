"""The live session (state/session.py) as the QObject the window and views connect to: its
notifications are emitted as Qt signals, its work runs on a QThreadPool and its timers are
QTimers (ui/workers.py). The logic of requests lives in the SessionModel, tested without Qt.
Its `frames` (ui/frames.py) spread the window's drawing over event-loop turns."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject, Signal

from ..state.session import TEXT_DEBOUNCE_MS, SessionModel
from .frames import Frames
from .generation.generation import GenerationControl
from .view_state import ViewState
from .workers import WorkerPool


class Session(ViewState, SessionModel):
    busyChanged = Signal(bool, str)      # work under way, what it is
    openFailed = Signal(str)             # a model did not open: one line naming the problem
    computeFailed = Signal(str)          # the text did not trace (e.g. empty): one line
    textChanged = Signal(str)            # the text was set (by the user or programmatically)
    # the active interventions, their trace (in, or dropped for a new clean trace), or whether
    # the stepper shows it changed (shownTraceChanged, what the views draw, is the ViewState's)
    interventionsChanged = Signal()
    interventionFailed = Signal(str)     # the intervened pass did not run: one line
    # a second model against this one came, went or was traced again, or the stage views
    # started or stopped showing A − B (shownTraceChanged follows when what they draw changes)
    differenceChanged = Signal()

    def __init__(self, parent: Optional[QObject] = None, debounce_ms: int = TEXT_DEBOUNCE_MS) -> None:
        super().__init__(parent=parent, scheduler=WorkerPool(), debounce_ms=debounce_ms)
        self.frames = Frames(self.workers, self)     # every view of this session draws through it

    def shutdown(self, msecs: int = -1) -> bool:
        self.frames.close()              # no drawing after the window closes
        return super().shutdown(msecs)

    def _new_generation(self) -> GenerationControl:
        return GenerationControl(self)   # generate / undo / the user's token (decoders)
