"""The encoder–decoder window's state (state/seq2seq.py's TranslationModel) as the QObject the
window connects to: its notifications are Qt signals, its work runs on a one-thread WorkerPool
and its pause before a re-trace is a QTimer. The logic of requests is the TranslationModel's,
tested without Qt (tests/state/test_seq2seq_requests.py)."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject, Signal

from ...state.seq2seq import EDIT_DEBOUNCE_MS, TranslationModel
from ..workers import WorkerPool


class TranslationState(QObject, TranslationModel):
    traced = Signal(bool, object)       # a new trace: a new model?, the target text to show or None
    targetChanged = Signal(str)         # the target text, set by the model (emptied)
    failed = Signal(str)                # the latest request failed (one line)

    def __init__(self, source: str = "", debounce_ms: int = EDIT_DEBOUNCE_MS,
                 parent: Optional[QObject] = None) -> None:
        super().__init__(parent, scheduler=WorkerPool(max_threads=1), source=source,
                         debounce_ms=debounce_ms)

    def _notify(self, name: str, *args) -> None:
        getattr(self, name).emit(*args)
