"""A small callback event, and the notify hook the state classes announce changes through."""
from __future__ import annotations

from typing import Callable


class Event:
    """connect / disconnect / emit: the slots run at once, in the order they connected.
    Slots are held strongly: whoever connects disconnects (ui/connections.py)."""

    def __init__(self) -> None:
        self._slots: list[Callable] = []

    def connect(self, slot: Callable) -> None:
        self._slots.append(slot)

    def disconnect(self, slot: Callable) -> None:
        try:
            self._slots.remove(slot)
        except ValueError:
            raise TypeError(f"{slot!r} is not connected") from None

    def emit(self, *args) -> None:
        for slot in list(self._slots):
            slot(*args)


class Events:
    """One Event per name, made on first use: `events.layerChanged.connect(...)`; a state
    class without Qt notifies through it (`events.notify("layerChanged", 2)`)."""

    def __init__(self) -> None:
        self._events: dict[str, Event] = {}

    def __getattr__(self, name: str) -> Event:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._events.setdefault(name, Event())

    def notify(self, name: str, *args) -> None:
        event = self._events.get(name)
        if event is not None:
            event.emit(*args)
