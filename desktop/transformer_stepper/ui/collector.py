"""Python's cyclic garbage, collected on the GUI thread only.

pyqtgraph's recipe (util/garbage_collector.py): automatic collection is turned off (it could run
in a worker thread, or in the middle of a Qt call, and destroy Qt objects there: a crash or a
deadlock) and a timer on the GUI thread collects by the same thresholds. One step is added:
the deletions Qt has deferred (`deleteLater`, a closed view or a test's widget) are carried out
first. Collecting before them frees the Python half of pyqtgraph items caught in pyqtgraph's own
reference cycles while Qt still holds their C++ half; Qt then calls them as it deletes them
(sizeHint, boundingRect, resizeEvent) and they raise ("LabelItem has no attribute _sizeHint").
Qt carries out only the deletions asked for at this event-loop level, so nothing a nested loop's
caller still uses is deleted."""
from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QEvent, QTimer


def collect(generation: int = 2) -> int:
    """Deferred Qt deletions first, then the collector (-> what it found unreachable)."""
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return gc.collect(generation)


class GuiThreadCollector:
    def __init__(self, interval: float = 1.0) -> None:
        self.threshold = gc.get_threshold()
        gc.disable()
        self.timer = QTimer()
        self.timer.timeout.connect(self.check)
        self.timer.start(int(interval * 1000))

    def check(self) -> None:
        young, middle, old = gc.get_count()
        t0, t1, t2 = self.threshold
        if young <= t0:
            return
        collect(2 if middle > t1 and old > t2 else 1 if middle > t1 else 0)
