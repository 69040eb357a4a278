"""How long the event loop was away: a 2 ms timer notes the gap between its ticks, and a gap
much longer than 2 ms is time the GUI thread spent elsewhere (building a view, drawing,
computing), during which the window did not answer. Benchmarks and tests use it to find the
longest stall and what was happening then."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QElapsedTimer, QObject, QTimer


class StallMeter(QObject):
    def __init__(self, interval_ms: int = 2, parent: Optional[QObject] = None) -> None:
        super().__init__(parent)
        self.label = ""                        # what is happening now (set by the caller)
        self.longest: dict[str, float] = {}    # label -> its longest gap, seconds
        self._clock = QElapsedTimer()
        self._last = 0
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.tick)

    def start(self) -> None:
        self._clock.start()
        self._last = self._clock.nsecsElapsed()
        self._timer.start()

    def tick(self) -> None:
        """Note the gap since the last tick (the timer calls it; call it once more at the end)."""
        now = self._clock.nsecsElapsed()
        gap = (now - self._last) / 1e9
        self._last = now
        if gap > self.longest.get(self.label, 0.0):
            self.longest[self.label] = gap

    def stop(self) -> float:
        self.tick()
        self._timer.stop()
        return self.worst()[1]

    def worst(self) -> tuple[str, float]:
        """(label, seconds) of the longest gap so far."""
        if not self.longest:
            return "", 0.0
        label = max(self.longest, key=self.longest.get)
        return label, self.longest[label]
