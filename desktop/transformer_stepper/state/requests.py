"""Latest request wins: work runs in workers, and a result that is no longer the latest of its
kind (the user typed on, opened another model) is dropped when it lands."""
from __future__ import annotations


class Requests:
    """Numbers every request of a state object, of every kind, in order."""

    def __init__(self) -> None:
        self._count = 0

    def next(self) -> int:
        self._count += 1
        return self._count


class Latest:
    """The newest request of one kind. `new()` numbers one and makes every earlier one stale;
    `drop()` makes every one stale (none is wanted any more)."""

    def __init__(self, requests: Requests) -> None:
        self._requests = requests
        self.number = -1

    def new(self) -> int:
        self.number = self._requests.next()
        return self.number

    def is_latest(self, number: int) -> bool:
        return number == self.number

    def drop(self) -> None:
        self.number = -1
