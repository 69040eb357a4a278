"""Signal connections a view makes to an object that outlives it (the session): made together,
undone together when the view closes, so a closed view is never called again."""
from __future__ import annotations

from typing import Iterable


class Connections:
    def __init__(self, pairs: Iterable[tuple] = ()) -> None:
        self._pairs: list[tuple] = []
        for signal, slot in pairs:
            self.connect(signal, slot)

    def connect(self, signal, slot) -> None:
        signal.connect(slot)
        self._pairs.append((signal, slot))

    def disconnect_all(self) -> None:
        for signal, slot in self._pairs:
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError):      # already gone (the session closed first)
                pass
        self._pairs = []
