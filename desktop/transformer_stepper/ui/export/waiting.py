"""An export asked for while the intervened pass the stepper is to show is still running waits
for it: exporting at once would freeze the clean trace (what `shown_trace` is until the
intervened one is in) under the user's "Show intervened". The status bar says so; the export
starts when the pass is in, or, if the user turns "Show intervened" off or clears the
interventions meanwhile, with what the stepper then shows. If the pass fails, nothing is
exported and the failure is said; a new export can be asked for (of the clean pass, once
"Show intervened" is off).

`Waiting.result` is what `start()` returned once it ran (an export job); `cancel()` drops the
export."""
from __future__ import annotations

from typing import Callable, Optional

from PySide6.QtCore import QObject, Signal

from .menu import warn

WAIT_MESSAGE = "Export waits for the intervened pass (Show intervened is on) …"


class Waiting(QObject):
    started = Signal(object)            # what start() returned
    dropped = Signal(str)               # the export did not start: why

    def __init__(self, window, start: Callable[[], object], what: str) -> None:
        super().__init__(window)
        self.window, self.what, self._start = window, what, start
        self.result: Optional[object] = None
        self.state = "waiting"          # started, dropped
        session = window.session
        session.interventionsChanged.connect(self._check)
        session.interventionFailed.connect(self._failed)
        session.modelChanged.connect(self._check)
        window.statusBar().showMessage(WAIT_MESSAGE)

    def _disconnect(self) -> None:
        session = self.window.session
        for signal, slot in ((session.interventionsChanged, self._check),
                             (session.interventionFailed, self._failed),
                             (session.modelChanged, self._check)):
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError, RuntimeWarning):
                pass

    def _check(self) -> None:
        session = self.window.session
        if self.state != "waiting" or session.waiting_for_intervened:
            return
        self._disconnect()
        if session.trace is None:
            self._drop("the model was closed")
            return
        self.state = "started"
        self.window.statusBar().clearMessage()
        self.result = self._start()
        self.started.emit(self.result)
        self.deleteLater()

    def _failed(self, message: str) -> None:
        if self.state == "waiting":
            self._disconnect()
            self._drop(f"the intervened pass failed ({message}); nothing was exported")

    def _drop(self, reason: str) -> None:
        self.state = "dropped"
        warn(self.window, f"Could not export {self.what}", reason)
        self.dropped.emit(reason)
        self.deleteLater()

    def cancel(self) -> None:
        if self.state == "waiting":
            self._disconnect()
            self.state = "dropped"
            self.window.statusBar().clearMessage()
            self.dropped.emit("cancelled")
            self.deleteLater()


def when_shown_ready(window, start: Callable[[], object], what: str):
    """start() now if the stepper shows what it is asked to show, else once the intervened
    pass is in. -> start()'s result, or a Waiting."""
    if not window.session.waiting_for_intervened:
        return start()
    return Waiting(window, start, what)
