"""The Compare view's state (state/compare.py's CompareModel) as the QObject the view
connects to: its notifications are Qt signals, its work runs on a one-thread WorkerPool and its
debounce is a QTimer; it follows the session's model and layer. The logic of requests is the
CompareModel's, tested without Qt (tests/state/test_compare_requests.py)."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject, Signal

from ...state.compare import TEXT_DEBOUNCE_MS, CompareModel
from ..connections import Connections
from ..session import Session
from ..workers import WorkerPool


class CompareState(QObject, CompareModel):
    resultChanged = Signal(bool)        # a new result; True if the comparison itself changed
    messageChanged = Signal(str)        # about the input as a whole ("" when all is well)
    busyChanged = Signal(bool)
    failed = Signal(str)                # the computation failed (one line)

    def __init__(self, session: Session, debounce_ms: int = TEXT_DEBOUNCE_MS,
                 parent: Optional[QObject] = None) -> None:
        super().__init__(parent, session=session, scheduler=WorkerPool(max_threads=1),
                         debounce_ms=debounce_ms)
        self._connections = Connections([(session.modelChanged, self.on_model),
                                         (session.layerChanged, self.on_layer)])

    def _notify(self, name: str, *args) -> None:
        getattr(self, name).emit(*args)

    def shutdown(self, msecs: int = -1) -> bool:
        self._connections.disconnect_all()
        return super().shutdown(msecs)
