"""Training off the GUI thread: the run (state/training_job.py) is a Job on a WorkerPool, in
a lane of its own; this QObject turns its reports into signals on the GUI thread. Pause and
Resume hold the loop between steps (the run's TrainControl); Stop is the job's cancel."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject, Signal

from ...core.training.recipe import Recipe
from ...state.training_job import FRAME_SECONDS, Frame, Outcome, TrainingRun
from ..workers import WorkerPool

__all__ = ["FRAME_SECONDS", "Frame", "Outcome", "TrainingWorker"]


class TrainingWorker(QObject):
    preparing = Signal(str)              # what is being done before the first step
    frame = Signal(object)               # a Frame
    finished_run = Signal(object)        # an Outcome (trained or stopped)
    failed = Signal(str)                 # one line

    def __init__(self, recipe: Recipe, workers: WorkerPool, max_snapshots: int = 64,
                 parent: Optional[QObject] = None) -> None:
        super().__init__(parent)
        # FRAME_SECONDS read now, from this module (the tests set it to 0: a frame every step)
        self.run = TrainingRun(recipe, max_snapshots, frame_seconds=FRAME_SECONDS)
        self.workers = workers
        self.job = self.run.job()

    @property
    def control(self):
        return self.run.control

    @property
    def frames_sent(self) -> int:
        return self.run.frames_sent

    def start(self) -> None:
        self.workers.start(self.job, self._done, self._failed, self._progress, self._cancelled)

    # -- GUI thread -------------------------------------------------------------------------
    def pause(self) -> None:
        self.control.pause()

    def resume(self) -> None:
        self.control.resume()

    def stop(self) -> None:
        self.job.cancel()                # ends between two steps (a paused run wakes to stop)

    def wait(self, msecs: int = -1) -> bool:
        """Until the run's function has returned (its outcome may still be on its way)."""
        return self.workers.wait_for(self.job, msecs)

    def isFinished(self) -> bool:
        return self.job.ended.is_set()

    def _progress(self, _number: int, _done: int, _total: int, news=None) -> None:
        if isinstance(news, Frame):
            self.frame.emit(news)
        elif isinstance(news, str):
            self.preparing.emit(news)

    def _done(self, _number: int, outcome: Outcome) -> None:
        self.finished_run.emit(outcome)

    def _failed(self, _number: int, message: str, _user_error: bool) -> None:
        self.failed.emit(message)

    def _cancelled(self, _number: int) -> None:
        self.failed.emit("stopped before the first step")
