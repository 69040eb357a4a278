"""How long the event loop was away: a 2 ms timer notes the gap between its ticks, and a gap
much longer than 2 ms is time the GUI thread spent elsewhere (building a view, drawing,
computing), during which the window did not answer. Benchmarks and tests use it to find the
longest stall and what was happening then. Beside each gap's wall time it notes the GUI
thread's own CPU time in it (`longest_cpu`): on a machine busy with other work a gap also holds
the time the thread waited for a core; its CPU time is what the app itself did in the turn."""
from __future__ import annotations

import time
from typing import Optional

from PySide6.QtCore import QElapsedTimer, QObject, QTimer


class StallMeter(QObject):
    def __init__(self, interval_ms: int = 2, parent: Optional[QObject] = None) -> None:
        super().__init__(parent)
        self.label = ""                        # what is happening now (set by the caller)
        self.longest: dict[str, float] = {}    # label -> its longest gap, seconds
        self.longest_cpu: dict[str, float] = {}   # label -> the most GUI-thread CPU in one gap
        self._last_cpu = 0.0
        self._clock = QElapsedTimer()
        self._last = 0
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.tick)

    def start(self) -> None:
        self._clock.start()
        self._last = self._clock.nsecsElapsed()
        self._last_cpu = time.thread_time()
        self._timer.start()

    def tick(self) -> None:
        """Note the gap since the last tick (the timer calls it; call it once more at the end)."""
        now = self._clock.nsecsElapsed()
        gap = (now - self._last) / 1e9
        self._last = now
        if gap > self.longest.get(self.label, 0.0):
            self.longest[self.label] = gap
        now_cpu = time.thread_time()
        cpu, self._last_cpu = now_cpu - self._last_cpu, now_cpu
        if cpu > self.longest_cpu.get(self.label, 0.0):
            self.longest_cpu[self.label] = cpu

    def stop(self) -> float:
        self.tick()
        self._timer.stop()
        return self.worst()[1]

    def worst_cpu(self) -> tuple[str, float]:
        """(label, seconds) of the gap in which the GUI thread itself computed longest."""
        if not self.longest_cpu:
            return "", 0.0
        label = max(self.longest_cpu, key=self.longest_cpu.get)
        return label, self.longest_cpu[label]

    def worst(self) -> tuple[str, float]:
        """(label, seconds) of the longest gap so far."""
        if not self.longest:
            return "", 0.0
        label = max(self.longest, key=self.longest.get)
        return label, self.longest[label]
