"""The guided walks' requests, without Qt. A walk is chosen, its steps walked with Back / Next;
each step's numbers are computed in a worker (core/analysis/walks.py's fill_step on the open
model) and, when they land and are still wanted, the window is put into the step's state.
Only the latest step wanted is shown: a step that lands after the user went on, after the walk
ended or after another walk began is dropped.

The user's own state (sentence, tab, stage, layer, head, selection, temperature, interventions)
is kept when a walk begins and given back when the walk ends with `end(restore=True)` (the
list, the dock closed); `end(restore=False)` (leave the walk here) keeps the window as the step
left it. A walk that has ended sets nothing again.

Whoever binds it to the window (ui/walks/walk_panel.py) shows what it notifies: changed() (the
walk, step or caption changed: labels and buttons follow), apply(Shown: put the window into
this step's state) and restore(UserState: put the window back into the user's state)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ..core.analysis.walks import Shown, Walk, fill_step
from .events import Events
from .requests import Latest, Requests
from .scheduler import Job
from .session import DEFAULT_TEXT

COMPUTING = "Computing this step's numbers…"


@dataclass(frozen=True)
class UserState:
    """What the user had before a walk: given back when the walk ends."""
    text: str
    tab: str
    stage: str
    layer: int
    head: int
    selected: int
    temperature: float
    interventions: tuple

    @classmethod
    def of(cls, session, tab: str) -> "UserState":
        """The session's state, with the window's tab `tab`."""
        return cls(session.text, tab, session.stage_key, session.layer, session.head,
                   session.selected_token, session.temperature, tuple(session.interventions))


class WalkModel:
    def __init__(self, session, walks: Sequence[Walk], extras: Callable[[], dict],
                 **rest) -> None:
        """`session`: the SessionModel whose model the steps read and whose scheduler computes
        them; `extras()`: the facts from files the readouts quote, read on the first step."""
        super().__init__(**rest)             # cooperative: a QObject adapter's parent
        self.events = Events()
        self.session = session
        self.walks = list(walks)
        self.walk: Optional[Walk] = None
        self.index = 0
        self.shown: Optional[Shown] = None             # the latest step shown
        self.before: Optional[UserState] = None        # the user's state when the walk began
        self.caption = ""
        self._latest = Latest(Requests())              # the step whose numbers are wanted
        self._extras_of = extras
        self._extras: Optional[dict] = None

    def _notify(self, name: str, *args) -> None:
        self.events.notify(name, *args)

    @property
    def n_steps(self) -> int:
        return len(self.walk.steps) if self.walk is not None else 0

    @property
    def can_go_back(self) -> bool:
        return self.index > 0

    @property
    def can_go_on(self) -> bool:
        return self.index < self.n_steps - 1

    # -- walking ------------------------------------------------------------------------------
    def start(self, number: int, tab: str) -> bool:
        """Walk `number` from its first step; `tab`: the window's tab now (kept with the user's
        state unless a walk was already under way: that walk's state is not the user's)."""
        if not 0 <= number < len(self.walks):
            return False
        if self.walk is None and self.before is None:
            self.before = UserState.of(self.session, tab)
        self.walk = self.walks[number]
        self.go(0)
        return True

    def back(self) -> None:
        self.go(self.index - 1)

    def next(self) -> None:
        self.go(self.index + 1)

    def go(self, index: int) -> None:
        """Step `index` of the walk: its numbers computed in a worker, then its state applied."""
        if self.walk is None or not 0 <= index < self.n_steps or self.session.model is None:
            return
        self.index = index
        self.caption = COMPUTING
        self._notify("changed")
        if self._extras is None:
            self._extras = self._extras_of()
        job = Job(self._latest.new(), fill_step,
                  (self.session.model, self.walk, index, DEFAULT_TEXT, self._extras))
        self.session.workers.start(job, self._on_filled, self._on_failed)

    def refresh(self) -> None:
        """The model changed: the same step again, with the new model's numbers."""
        if self.walk is not None:
            self.go(self.index)

    def _on_filled(self, number: int, shown: Shown) -> None:
        if not self._latest.is_latest(number) or shown.walk is not self.walk:
            return
        self.shown = shown
        self._notify("apply", shown)
        self.caption = shown.caption if shown.applies else f"ℹ {shown.caption}"
        self._notify("changed")

    def _on_failed(self, number: int, message: str, user_error: bool) -> None:
        if self._latest.is_latest(number):
            self.caption = f"⚠ This step could not be computed on this model: {message}"
            self._notify("changed")

    def end(self, restore: bool) -> None:
        """No walk any more (its pending step dropped); `restore`: the user's state back (when
        a model is open to show it)."""
        self.walk = None
        self._latest.drop()
        before, self.before = self.before, None
        if restore and before is not None and self.session.model is not None:
            self._notify("restore", before)
