"""The app's scheduler (state/scheduler.py): jobs on a QThreadPool, single-shot QTimers.

A Task runs one Job (a plain function and its arguments) on the pool; its result or its
one-line error crosses back to the GUI thread only through Qt signals (queued, because the
signals object lives in the GUI thread). Workers never touch a widget. Whoever starts a job
decides whether its result is still wanted (state/requests.py: the latest request wins); a
stale result is simply dropped.

A function that takes a `progress` keyword reports through it (`progress(done, total)`, e.g.
layers of a forward pass), and through it a job is cancelled: once `cancel()` is called, the
next report raises Cancelled inside the function, which ends with the `cancelled` signal.
`progress(done, total, news)` also carries what the job has to show (a training frame).

A job's lane (Job.lane) picks its threads: the default lane's `max_threads`, or a named lane's
own (one thread unless `lane_threads` says more), so training or an export's writes never
take the threads tracing needs. The pool is one mechanism: idle, wait() and active() count
every lane."""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

from PySide6.QtCore import QObject, QRunnable, QThreadPool, QTimer, Signal

from ..state.scheduler import Cancelled, Job, run_job


class TaskSignals(QObject):
    finished = Signal(int, object)      # request id, result
    failed = Signal(int, str, bool)     # request id, one-line message, is_user_error
    progress = Signal(int, int, int)    # request id, done, total
    news = Signal(int, int, int, object)   # request id, done, total, what the job has to show
    cancelled = Signal(int)             # request id: stopped at a progress report


class Task(QRunnable):
    def __init__(self, request_id: int, function: Callable[..., Any], *args: Any,
                 reports: bool = False, job: Optional[Job] = None) -> None:
        """`reports`: pass the function a `progress` keyword (and so make it cancellable)."""
        super().__init__()
        self.setAutoDelete(False)       # the Python side keeps it until its signal arrives
        self.job = job or Job(request_id, function, args, reports)
        self.request_id = self.job.number
        self.signals = TaskSignals()

    def cancel(self) -> None:
        """Stop at the function's next progress report (a function that reports none runs on)."""
        self.job.cancel()

    def report(self, done: int, total: int, news: Any = None) -> None:
        if self.job.cancelled:
            raise Cancelled()
        if news is None:
            self.signals.progress.emit(self.request_id, done, total)
        else:
            self.signals.news.emit(self.request_id, done, total, news)

    def run(self) -> None:
        # run_job drops the job's arguments first: Qt may keep the finished runnable (and so
        # this object) alive after its result is delivered
        outcome = run_job(self.job, self.report)
        if outcome[0] == "done":
            self.signals.finished.emit(self.request_id, outcome[1])
        elif outcome[0] == "failed":
            self.signals.failed.emit(self.request_id, outcome[1], outcome[2])
        else:
            self.signals.cancelled.emit(self.request_id)


class WorkerPool:
    """A private QThreadPool (so tests and shutdown can wait for exactly our work) that keeps
    each running Task alive until its result has been delivered; the Scheduler of
    state/scheduler.py."""

    def __init__(self, max_threads: int = 2, on_idle: Optional[Callable[[], None]] = None,
                 lane_threads: Optional[dict[str, int]] = None) -> None:
        """`on_idle()` is called (on the GUI thread) each time the last running task ends."""
        self.pool = QThreadPool()
        self.pool.setMaxThreadCount(max_threads)
        self.lane_threads = dict(lane_threads or {})
        self._lanes: dict[str, QThreadPool] = {"": self.pool}
        self._running: set[Task] = set()
        self.on_idle = on_idle

    def lane(self, name: str) -> QThreadPool:
        if name not in self._lanes:
            pool = QThreadPool()
            pool.setMaxThreadCount(self.lane_threads.get(name, 1))
            self._lanes[name] = pool
        return self._lanes[name]

    def start(self, task: Union[Task, Job], on_finished: Callable[[int, object], None],
              on_failed: Callable[[int, str, bool], None],
              on_progress: Optional[Callable[[int, int, int], None]] = None,
              on_cancelled: Optional[Callable[[int], None]] = None) -> None:
        if isinstance(task, Job):
            task = Task(task.number, task.function, job=task)
        self._running.add(task)
        task.signals.finished.connect(on_finished)
        task.signals.failed.connect(on_failed)
        if on_progress is not None:
            task.signals.progress.connect(on_progress)
            task.signals.news.connect(on_progress)
        if on_cancelled is not None:
            task.signals.cancelled.connect(on_cancelled)
        for ended in (task.signals.finished, task.signals.failed, task.signals.cancelled):
            ended.connect(lambda *_: self._ended(task))
        self.lane(task.job.lane).start(task)

    def timer(self, msecs: int, callback: Callable[[], None]) -> QTimer:
        """A single-shot timer (start() again restarts it); its owner keeps it."""
        timer = QTimer()
        timer.setSingleShot(True)
        timer.setInterval(msecs)
        timer.timeout.connect(callback)
        return timer

    def _ended(self, task: Task) -> None:
        if task in self._running:
            self._running.discard(task)
            if not self._running and self.on_idle is not None:
                self.on_idle()

    @property
    def idle(self) -> bool:
        return not self._running

    def wait(self, msecs: int = -1) -> bool:
        """Wait for every lane (msecs each)."""
        return all([pool.waitForDone(msecs) for pool in list(self._lanes.values())])

    def wait_for(self, job: Job, msecs: int = -1) -> bool:
        """Wait for one job to end (it may still be queued: then until it has run)."""
        return job.wait(msecs)

    def active(self) -> int:
        return sum(pool.activeThreadCount() for pool in self._lanes.values())
