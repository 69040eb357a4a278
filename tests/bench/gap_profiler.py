"""What the GUI thread computed in its longest turns: cProfile runs on the GUI thread only, and a
2 ms Qt timer cuts it at every event-loop turn; a turn in which the thread used more than
`threshold` of its own CPU keeps its profile (the functions with the most cumulative time in
the project and in pyqtgraph), labelled with what the bench was doing. CPU time, not wall: on a
loaded machine a gap is mostly the thread waiting for a core. The profiler's own overhead makes
the turns' CPU larger (about 1.5-2x where the work is Python); the proportions are what count.

    profiler = GapProfiler(0.05); profiler.start(); ...; profiler.stop(); print(profiler.report())
"""
from __future__ import annotations

import cProfile
import io
import pstats
import time

from PySide6.QtCore import QTimer

OURS = ("transformer_stepper", "pyqtgraph", "PySide6", "numpy")


class GapProfiler:
    def __init__(self, threshold: float = 0.05, top: int = 14) -> None:
        self.threshold, self.top = threshold, top
        self.label = ""
        self.kept: list[tuple[float, str, str]] = []       # (GUI CPU s, label, the profile's text)
        self._profile = cProfile.Profile(time.thread_time)      # (CPU, not wall)
        self._last_cpu = time.thread_time()
        self._timer = QTimer()
        self._timer.setInterval(2)
        self._timer.timeout.connect(self._tick)

    def start(self) -> None:
        self._last_cpu = time.thread_time()
        self._profile.enable()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self._profile.disable()

    def _tick(self) -> None:
        self._profile.disable()
        cpu = time.thread_time()
        took, self._last_cpu = cpu - self._last_cpu, cpu
        if took > self.threshold:
            self.kept.append((took, self.label, self._text()))
        self._profile = cProfile.Profile(time.thread_time)
        self._last_cpu = time.thread_time()       # (the profile's own report left out)
        self._profile.enable()

    def _text(self) -> str:
        out = io.StringIO()
        stats = pstats.Stats(self._profile, stream=out)
        stats.sort_stats("cumulative").print_stats("|".join(OURS), self.top)
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        start = next((n for n, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
        return "\n".join(lines[start:])

    def report(self, most: int = 8) -> str:
        if not self.kept:
            return f"no turn with over {1000 * self.threshold:.0f} ms of GUI-thread CPU"
        parts = []
        for took, label, text in sorted(self.kept, key=lambda k: -k[0])[:most]:
            parts.append(f"--- {1000 * took:,.0f} ms of GUI-thread CPU (profiled) at: {label}\n{text}")
        return "\n".join(parts)
