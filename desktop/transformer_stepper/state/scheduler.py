"""How state objects run work and wait: the Scheduler protocol, and a manual one for tests.

`start(job, ...)` runs `job.function(*job.args)` off the caller's thread and calls back on the
caller's thread: `on_done(number, result)`, `on_failed(number, message, user_error)`,
`on_progress(number, done, total)`, `on_cancelled(number)`. A job that `reports` gets a
`progress` keyword; after `job.cancel()` its next report stops it (on_cancelled).
`progress(done, total, news)` also hands `news` (what the job has to show so far: a training
frame) to `on_progress` as a fourth argument. A job's `lane` names the threads it runs on: a
named lane has threads of its own, so a long job (training, an export's writes) never holds
back the default lane's (tracing). `wait_for(job)` waits for that one job to end.
`timer(msecs, callback)` -> a single-shot Timer: start() (again) runs callback once, msecs after
the last start; stop() cancels. ui/workers.py's WorkerPool is the app's (QThreadPools, QTimer):
tracing, training and exports all run on it."""
from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from ..core.model.errors import ModelError


class Cancelled(Exception):
    """Raised inside a job's function at its next progress report after cancel()."""


@dataclass(eq=False)
class Job:
    number: int
    function: Callable[..., Any]
    args: tuple = ()
    reports: bool = False            # pass a `progress` keyword (and so be cancellable)
    lane: str = ""                   # "" = the default lane; else a lane with threads of its own
    on_cancel: Optional[Callable[[], None]] = None   # also told on cancel() (wakes a paused loop)
    cancelled: bool = field(default=False, init=False)
    ended: threading.Event = field(default_factory=threading.Event, init=False, repr=False)

    def cancel(self) -> None:
        """Stop at the function's next progress report (a function that reports none runs on)."""
        self.cancelled = True
        if self.on_cancel is not None:
            self.on_cancel()

    def wait(self, msecs: int = -1) -> bool:
        """Block until the job's function has returned (or raised). -> it has."""
        return self.ended.wait(None if msecs < 0 else msecs / 1000)


class Timer(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def isActive(self) -> bool: ...


class Scheduler(Protocol):
    on_idle: Optional[Callable[[], None]]      # called each time the last running job ends

    def start(self, job: Job, on_done: Callable, on_failed: Callable,
              on_progress: Optional[Callable] = None, on_cancelled: Optional[Callable] = None) -> None: ...

    def timer(self, msecs: int, callback: Callable[[], None]) -> Timer: ...

    @property
    def idle(self) -> bool: ...

    def wait(self, msecs: int = -1) -> bool: ...

    def wait_for(self, job: Job, msecs: int = -1) -> bool: ...


def run_job(job: Job, report: Callable[[int, int], None]):
    """-> ("done", result) | ("failed", message, user_error) | ("cancelled",): a job run
    where a scheduler runs it (a worker thread, or the test's thread). A bug is reported,
    not lost in a thread. The job lets go of its arguments first: a job kept by its starter
    (to cancel it) never keeps a trace or a model alive."""
    function, args = job.function, job.args
    job.args = ()
    try:
        result = function(*args, progress=report) if job.reports else function(*args)
    except Cancelled:
        return ("cancelled",)
    except ModelError as exc:
        return ("failed", str(exc), True)
    except MemoryError:
        return ("failed", "out of memory", True)
    except Exception as exc:
        traceback.print_exc()
        return ("failed", f"{type(exc).__name__}: {exc}", False)
    finally:
        del function, args
        job.ended.set()
    return ("done", result)


class ManualTimer:
    def __init__(self, scheduler: "ManualScheduler", msecs: int, callback: Callable[[], None]) -> None:
        self.scheduler, self.msecs, self.callback = scheduler, msecs, callback
        self.due: Optional[float] = None

    def start(self) -> None:
        self.due = self.scheduler.now + self.msecs

    def stop(self) -> None:
        self.due = None

    def isActive(self) -> bool:
        return self.due is not None


class ManualScheduler:
    """Nothing runs until the test says so: `run_next()` runs the oldest job (its callbacks
    included), `advance(ms)` moves the clock and fires the timers that fall due. Ordering bugs
    become millisecond tests."""

    def __init__(self) -> None:
        self.now = 0.0
        self.jobs: list[tuple] = []
        self.timers: list[ManualTimer] = []
        self.on_idle: Optional[Callable[[], None]] = None

    def start(self, job: Job, on_done, on_failed, on_progress=None, on_cancelled=None) -> None:
        self.jobs.append((job, on_done, on_failed, on_progress, on_cancelled))

    def timer(self, msecs: int, callback: Callable[[], None]) -> ManualTimer:
        timer = ManualTimer(self, msecs, callback)
        self.timers.append(timer)
        return timer

    @property
    def idle(self) -> bool:
        return not self.jobs

    def wait(self, msecs: int = -1) -> bool:
        return True

    def wait_for(self, job: Job, msecs: int = -1) -> bool:
        """Runs the job now if it is still queued (what a thread would have done meanwhile)."""
        for index, queued in enumerate(self.jobs):
            if queued[0] is job:
                self.run_next(index)
                break
        return job.ended.is_set()

    def run_next(self, index: int = 0) -> Job:
        job, on_done, on_failed, on_progress, on_cancelled = self.jobs.pop(index)

        def report(done: int, total: int, news: Any = None) -> None:
            if job.cancelled:
                raise Cancelled()
            if on_progress is not None:
                on_progress(job.number, done, total, *(() if news is None else (news,)))

        outcome = run_job(job, report)
        if outcome[0] == "done":
            on_done(job.number, outcome[1])
        elif outcome[0] == "failed":
            on_failed(job.number, outcome[1], outcome[2])
        elif on_cancelled is not None:
            on_cancelled(job.number)
        if not self.jobs and self.on_idle is not None:
            self.on_idle()
        return job

    def run_all(self) -> None:
        while self.jobs:
            self.run_next()

    def advance(self, msecs: float) -> None:
        self.now += msecs
        for timer in sorted((t for t in self.timers if t.due is not None and t.due <= self.now),
                            key=lambda t: t.due):
            if timer.due is not None and timer.due <= self.now:
                timer.due = None
                timer.callback()
