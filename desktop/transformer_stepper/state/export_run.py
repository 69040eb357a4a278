"""Running an export of many figures: the order of its steps, its jobs and its end, without Qt.

The figures are drawn by steps on the caller's thread (Qt paints only on the GUI thread), one
per turn of the scheduler's zero-delay timer: `steps(report)` is a generator that yields after
each figure (a `Write` to hand to a worker), or a `Detail(layer)` when the next figures read a
layer's detail: that is computed in a job first, the steps held (the event loop free) until it
is in. Writes are jobs on the scheduler's "export" lane; at most `max_pending` rendered
figures wait for it, so memory stays bounded. `report(done, total, name)` is the export's
progress (it stops a step of a run that has ended). cancel() stops before the next figure:
the writes of figures already drawn finish (milliseconds each; dropping them made what was
saved depend on thread timing) and count.

events: progressed(done, total, name), fileWritten(path, replaced), finished(),
failed(message), cancelled()."""
from __future__ import annotations

import itertools
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from .events import Events
from .scheduler import Cancelled, Job, Scheduler

LANE = "export"              # writes: a lane of their own, in the order drawn


@dataclass(frozen=True)
class Detail:
    layer: int               # the next steps read this layer's detail: compute it in a job first


@dataclass(frozen=True)
class Write:
    path: Path
    what: tuple              # write(path, *what) -> (path, replaced an existing file)


Steps = Callable[[Callable[[int, int, str], None]], Iterator[Optional[object]]]


class ExportRun:
    def __init__(self, scheduler: Scheduler, steps: Steps, write: Callable[..., tuple[str, bool]],
                 compute: Callable[[int], object], max_pending: int = 3,
                 release: Optional[Callable[[bool], None]] = None) -> None:
        """`compute(layer)`: a layer's detail (a worker); `release(stepping)`: free what the
        steps drew with, once the run has ended (`stepping`: a step is still under way)."""
        self.scheduler, self.write, self.compute = scheduler, write, compute
        self.max_pending = max_pending
        self.release = release
        self.events = Events()
        self.state = "idle"                # running, done, failed, cancelled
        self.written: list[Path] = []
        self.replaced: list[Path] = []
        self.error: Optional[str] = None
        self.interrupted = False           # Ctrl-C while stepping
        self._make_steps = steps
        self._steps: Optional[Iterator] = None
        self._steps_done = False
        self._stepping = False
        self._numbers = itertools.count()
        self._writes: dict[int, Job] = {}          # number -> a write not yet delivered
        self._completed: list[tuple[int, tuple[str, bool]]] = []
        self._delivered: set[int] = set()
        self._computing: dict[int, Job] = {}       # layer -> its detail being computed
        self._waiting: Optional[int] = None        # the layer the steps wait for
        self._timer = scheduler.timer(0, self._tick)

    @property
    def writing(self) -> bool:
        """A write is queued, under way, or its result not yet delivered."""
        return bool(self._writes)

    # -- control ------------------------------------------------------------------------
    def start(self) -> None:
        if self.state != "idle":
            raise RuntimeError("an export runs once")
        self.state = "running"
        self._steps = self._make_steps(self.report)
        self._timer.start()

    def report(self, done: int, total: int, name: str) -> None:
        """The steps' progress. Like a job's report, it stops the step (Cancelled) once the
        run has ended, also when it ends in here (a modal progress dialog runs the event loop
        inside: a write can fail there): nothing more is drawn, reported or written."""
        if self.state == "running":
            self.events.notify("progressed", done, total, name)
        if self.state != "running":
            raise Cancelled()

    def cancel(self) -> None:
        if self.state != "running":
            return
        self.state = "cancelled"
        self._stop()
        self.events.notify("cancelled")

    # -- the steps (the caller's thread) --------------------------------------------------
    def _tick(self) -> None:
        if self.state != "running" or self._stepping or self._held:
            return
        self._stepping = True
        try:
            item = next(self._steps)
        except StopIteration:
            self._steps_done = True
            self._finish_if_done()
            return
        except Cancelled:                  # the run ended during the step: nothing more
            return
        except KeyboardInterrupt:          # Ctrl-C lands in whatever Python runs: here, mostly
            self.interrupted = True
            self.cancel()
            return
        except Exception as exc:           # a bug in a view or in rendering: said, not lost
            traceback.print_exc()
            self._fail(f"rendering failed: {type(exc).__name__}: {exc}")
            return
        finally:
            self._stepping = False
        if self.state != "running":        # it ended during the step (a failed write, cancel)
            self._steps.close()
            return
        if isinstance(item, Write):
            self._submit(item)
        elif isinstance(item, Detail):
            self._detail(item.layer)
        self._go_on()

    @property
    def _held(self) -> bool:
        """Until the layer waited for is in, or a write is done (each restarts the steps)."""
        return self._waiting is not None or len(self._writes) >= self.max_pending

    def _go_on(self) -> None:
        if (self.state == "running" and not self._steps_done and not self._held
                and not self._timer.isActive()):
            self._timer.start()

    def _detail(self, layer: int) -> None:
        if layer not in self._computing:
            job = Job(next(self._numbers), self.compute, (layer,))
            self._computing[layer] = job
            self.scheduler.start(job, lambda _n, _result: self._on_computed(layer),
                                 lambda _n, message, _user: self._fail(
                                     f"computing layer {layer} failed: {message}"))
        self._waiting = layer

    def _on_computed(self, layer: int) -> None:
        self._computing.pop(layer, None)
        if self._waiting == layer:
            self._waiting = None
            self._go_on()

    # -- the writes (a worker) -------------------------------------------------------------
    def _submit(self, item: Write) -> None:
        number = next(self._numbers)
        job = Job(number, self._write, (number, item.path, item.what), lane=LANE)
        self._writes[number] = job
        self.scheduler.start(job, self._on_written, self._on_write_failed)

    def _write(self, number: int, path: Path, what: tuple) -> tuple[str, bool]:
        """Worker side. Also noted here (list.append is atomic), so that a run stopped while a
        write was under way still counts and reports that file."""
        result = self.write(path, *what)
        self._completed.append((number, result))
        return result

    def _on_written(self, number: int, result: tuple[str, bool]) -> None:
        self._writes.pop(number, None)
        if number in self._delivered:
            return
        self._delivered.add(number)
        path, replaced = Path(result[0]), result[1]
        self.written.append(path)
        if replaced:
            self.replaced.append(path)
        self.events.notify("fileWritten", str(path), replaced)
        self._go_on()
        self._finish_if_done()

    def _on_write_failed(self, number: int, message: str, user_error: bool) -> None:
        self._writes.pop(number, None)
        self._fail(message if user_error else f"writing failed: {message}")

    # -- ending -------------------------------------------------------------------------------
    def _finish_if_done(self) -> None:
        if self.state == "running" and self._steps_done and not self._writes:
            self.state = "done"
            self._stop()
            self.events.notify("finished")

    def _fail(self, message: str) -> None:
        if self.state != "running":
            return
        self.state = "failed"
        self.error = message
        self._stop()
        self.events.notify("failed", message)

    def _stop(self) -> None:
        """Stop stepping, let the writes of figures already drawn finish and count them, and
        let go of what the steps drew with."""
        self._timer.stop()
        if self._steps is not None and not self._stepping:
            self._steps.close()
        for job in list(self._writes.values()):
            self.scheduler.wait_for(job)
        for number, result in list(self._completed):   # finished while we waited
            self._on_written(number, result)
        if self.release is not None:
            self.release(self._stepping)
