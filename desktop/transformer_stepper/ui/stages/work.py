"""What a stage view draws from beyond layer detail (the logit lens, the predictions, a
histogram's counts), computed once per trace in a worker, never on the GUI thread; in an
export's snapshot, which draws at once, computed there."""
from __future__ import annotations

import weakref
from typing import Optional

from shiboken6 import isValid

from ..workers import Task


class WorkOnce:
    """The work a stage view (base.StageView) waits for and the work that failed, per trace. It holds the view weakly
    (the view owns it); a worker's callback keeps no trace alive."""

    def __init__(self, view) -> None:
        self._view = weakref.ref(view)
        self.pending: Optional[weakref.ref] = None     # the trace a worker computes for
        self.failed: Optional[tuple] = None            # (trace ref, message): work that failed

    def start(self, ready: bool, job, *args, message: str) -> Optional[str]:
        """None when `ready`, else `message` until the worker reports and the view redraws
        (a failure's message, said once and not retried for this trace)."""
        if ready:
            return None
        view = self._view()
        if view.session.inline_work:
            job(*args)
            return None
        trace = view.trace
        if self.failed is not None and self.failed[0]() is trace:
            return f"⚠ {self.failed[1]}"
        if self.pending is None or self.pending() is not trace:
            self.pending = pending = weakref.ref(trace)
            view.session.workers.start(Task(0, job, *args), lambda *_: self.done(),
                                       lambda _, message, __: self.fail(pending, message))
        return message

    def fail(self, trace: weakref.ref, message: str) -> None:
        view = self._view()
        if view is not None and isValid(view):
            self.failed = (trace, message)
            self.done()

    def done(self) -> None:
        """The work reported: the view redraws if it is still there and shown."""
        view = self._view()
        if view is not None and isValid(view):   # the view may have closed while the worker ran
            self.pending = None
            if view.isVisible():
                view.ensure_current()
