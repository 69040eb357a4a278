"""Pause, resume and stop a training run from another thread (the app's Pause and Stop).

The loop calls `checkpoint()` between steps: it returns at once while running, waits while
paused, and raises TrainingStopped once stopped, so a run ends between two updates, never in
the middle of one. Only the standard library's threading: no Qt here."""
from __future__ import annotations

import threading
import time


class TrainingStopped(Exception):
    """Raised inside the training loop by a stopped TrainControl."""


class TrainControl:
    def __init__(self) -> None:
        self._running = threading.Event()
        self._running.set()
        self._stopped = False
        self.paused_seconds = 0.0        # wall time spent paused so far
        self.waiting = False             # the loop is held in checkpoint() right now

    @property
    def paused(self) -> bool:
        return not self._running.is_set() and not self._stopped

    @property
    def stopped(self) -> bool:
        return self._stopped

    def pause(self) -> None:
        if not self._stopped:
            self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stopped = True
        self._running.set()              # a paused loop wakes up to stop

    def checkpoint(self) -> None:
        """Between steps: wait while paused; raise TrainingStopped when stopped."""
        if not self._running.is_set():
            started = time.perf_counter()
            self.waiting = True
            self._running.wait()
            self.waiting = False
            self.paused_seconds += time.perf_counter() - started
        if self._stopped:
            raise TrainingStopped("training stopped")
