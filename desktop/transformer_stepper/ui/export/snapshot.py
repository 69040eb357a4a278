"""A view state frozen at one model, trace, selection, temperature and sampling settings, whose layer and head an
export walks without touching the window: what the user sees stays as it is, and typing on
during a long export cannot mix two texts into one folder.

It is a ViewState (ui/view_state.py), the interface the stage views read, taken from the live
session's; it has no workers and never opens, traces or generates: the views compute what
they read when they draw."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject

from ..view_state import ViewState


class SnapshotSession(ViewState):
    @classmethod
    def of(cls, state: ViewState, parent: Optional[QObject] = None) -> "SnapshotSession":
        """What `state` (the live session) shows now (it must have a trace): the intervened
        trace while the stepper shows it, and the prediction stage's distribution drawn with
        the user's sampling settings (temperature, top-k, top-p). While the intervened pass
        the user asked to see is still running there is nothing to freeze yet: the caller
        waits for it (dialogs.py, when_shown_ready)."""
        if state.trace is None or state.model is None:
            raise ValueError("the session has no trace to export")
        if getattr(state, "waiting_for_intervened", False):
            raise ValueError("the intervened pass is still running")
        snapshot = cls(state.model, state.shown_trace, layer=state.layer, head=state.head,
                       selected=state.selected_token, temperature=state.temperature,
                       labels=state.token_labels(), stage_key=state.stage_key, parent=parent)
        snapshot.generation.sampling = state.generation.sampling
        return snapshot
