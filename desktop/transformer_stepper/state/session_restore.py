"""A saved session's trace, restored without Qt: once the session's model is open, its text is
traced in a worker on the session's Scheduler, the generated ids appended by the same KV-cache
step generation uses (io/session_file.py reads the file; ui/menus/session_file.py checks the
model, asks the user, and sets the view from the trace).

The latest restore wins (state/requests.py): one started after it, another model opened, or
`cancel()` makes a trace still on its way stale; it is dropped when it lands. Notifies, through
`events`: traced(number, trace) or failed(number, message), once for a restore that is still the
latest when it lands (`number`: what `start` returned)."""
from __future__ import annotations

from ..core.trace.trace import Trace
from .events import Events
from .requests import Latest, Requests
from .scheduler import Job, Scheduler


def restore_trace(model, text: str, generated: tuple[int, ...], layer: int) -> Trace:
    """Worker: the text's trace, the generated ids appended, the shown layer's detail ready."""
    trace = model.trace(text)
    if generated:
        trace = model.extend(trace, generated)
    trace.prepare(min(layer, model.config.n_layer - 1))
    return trace


class SessionRestore:
    def __init__(self, scheduler: Scheduler) -> None:
        self.workers = scheduler
        self.events = Events()
        self._restoring = Latest(Requests())

    @property
    def busy(self) -> bool:
        """A restore is on its way (and still wanted)."""
        return self._restoring.number != -1

    def start(self, model, text: str, generated: tuple[int, ...], layer: int) -> int:
        """Trace `text` on `model` in a worker; an earlier restore still running is stale.
        -> the restore's number."""
        number = self._restoring.new()
        self.workers.start(Job(number, restore_trace, (model, text, tuple(generated), layer)),
                           self._traced, self._failed)
        return number

    def cancel(self) -> None:
        """No restore is wanted any more (another model opened, the window closes)."""
        self._restoring.drop()

    def _traced(self, number: int, trace: Trace) -> None:
        if self._restoring.is_latest(number):
            self._restoring.drop()
            self.events.notify("traced", number, trace)

    def _failed(self, number: int, message: str, _user_error: bool) -> None:
        if self._restoring.is_latest(number):
            self._restoring.drop()
            self.events.notify("failed", number, message)
