"""What the GUI thread is doing during a stall: a 2 ms Qt timer notes when the event loop last
turned; a Python thread looks every 10 ms and, while the loop has been away longer than
`threshold`, takes the GUI thread's stack (sys._current_frames). Each stall keeps its samples,
so the longest ones can be told by their commonest frames in the project and in pyqtgraph.

    sampler = StallSampler(); sampler.start(); ...; sampler.stop(); print(sampler.report())
"""
from __future__ import annotations

import collections
import sys
import threading
import time
import traceback

from PySide6.QtCore import QTimer

OURS = ("transformer_stepper", "pyqtgraph")


class StallSampler:
    def __init__(self, threshold: float = 0.05, every: float = 0.01, stacks: bool = True) -> None:
        self.threshold, self.every, self.stacks = threshold, every, stacks
        self.label = ""
        self.stalls: list[dict] = []          # {"label", "start", "seconds", "stacks"}
        self._last = time.perf_counter()
        self._last_cpu = time.thread_time()
        self.gaps: list[tuple[float, float, str]] = []   # (wall s, GUI-thread CPU s, label) over 20 ms
        self._timer = QTimer()
        self._timer.setInterval(2)
        self._timer.timeout.connect(self._tick)
        self._gui = threading.get_ident()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._current = None

    def start(self) -> None:
        self._last = time.perf_counter()
        self._timer.start()
        if self.stacks:          # (without: the gaps and their GUI-thread CPU only)
            self._thread.start()

    def stop(self) -> None:
        self._timer.stop()
        self._done.set()
        if self.stacks:
            self._thread.join()

    def _tick(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()      # (this is the GUI thread)
        if now - self._last > 0.02:
            self.gaps.append((now - self._last, cpu - self._last_cpu, self.label))
        self._last_cpu = cpu
        if self._current is not None:
            self._current["seconds"] = now - self._current["start"]
            self._current = None
        self._last = now

    def _watch(self) -> None:
        while not self._done.wait(self.every):
            last = self._last
            if time.perf_counter() - last < self.threshold:
                continue
            frame = sys._current_frames().get(self._gui)
            if frame is None:
                continue
            if self._current is None or self._current["start"] != last:
                self._current = {"label": self.label, "start": last, "seconds": 0.0, "stacks": []}
                self.stalls.append(self._current)
            self._current["stacks"].append(traceback.extract_stack(frame))

    def cpu_report(self) -> str:
        """The longest gaps by wall time and by the GUI thread's own CPU time in them (on a
        loaded machine a gap is also time the thread waited for a core)."""
        if not self.gaps:
            return "no gap over 20 ms"
        wall = max(self.gaps)
        cpu = max(self.gaps, key=lambda g: g[1])
        return (f"longest gap {1000 * wall[0]:,.0f} ms wall ({1000 * wall[1]:,.0f} ms of GUI-thread CPU) at "
                f"{wall[2]}; most GUI-thread CPU in one gap {1000 * cpu[1]:,.0f} ms ({1000 * cpu[0]:,.0f} ms "
                f"wall) at {cpu[2]}; gaps over 100 ms: {sum(g[0] > 0.1 for g in self.gaps)} wall, "
                f"{sum(g[1] > 0.1 for g in self.gaps)} by CPU, of {len(self.gaps)} over 20 ms")

    def report(self, over: float = 0.1, top: int = 5) -> str:
        lines = []
        for stall in sorted(self.stalls, key=lambda s: -s["seconds"])[:top]:
            if stall["seconds"] < over:
                break
            lines.append(f"stall {1000 * stall['seconds']:,.0f} ms at {stall['label']} "
                         f"({len(stall['stacks'])} samples), commonest frames:")
            counts = collections.Counter()
            for stack in stall["stacks"]:
                ours = [f"{f.filename.split('site-packages/')[-1].split('desktop/')[-1]}:{f.lineno} {f.name}"
                        for f in stack if any(o in f.filename for o in OURS)]
                counts.update(set(ours[-6:]))       # the innermost six: what runs, and its callers
            for frame, n in counts.most_common(8):
                lines.append(f"    {n:>3}/{len(stall['stacks'])}  {frame}")
        return "\n".join(lines) or f"no stall over {1000 * over:.0f} ms"
