"""A single-shot QTimer owned by a widget or object: `start()` (again) runs `slot` once,
`msecs` after the last start (a debounce, a delay, a turn of the event loop)."""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, QTimer


def one_shot(parent: QObject, msecs: int, slot: Callable[[], None]) -> QTimer:
    timer = QTimer(parent)
    timer.setSingleShot(True)
    timer.setInterval(msecs)
    timer.timeout.connect(slot)
    return timer
