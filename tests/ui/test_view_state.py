"""The views read a ViewState: the live Session is one (and hosts models besides), an export's
snapshot is one (and nothing more). The order of the session's announcements (a model and its
trace change together) is tested without Qt, in tests/state/."""
import ast
from pathlib import Path

from transformer_stepper.core.trace.generate import Sampling
from transformer_stepper.ui.export.snapshot import SnapshotSession
from transformer_stepper.ui.session import Session
from transformer_stepper.ui.view_state import ViewState

STAGE_VIEWS = Path(__file__).parents[2] / "desktop" / "transformer_stepper" / "ui" / "stages"
HOST_ONLY = {"workers"}      # logit_lens.py reads it only where `inline_work` is False


def test_the_snapshot_is_a_view_state_with_nothing_to_host(qtbot, open_session):
    session = open_session("gpt2")
    snapshot = SnapshotSession.of(session)
    assert isinstance(session, ViewState) and isinstance(snapshot, ViewState)
    assert not isinstance(snapshot, Session)
    assert not hasattr(snapshot, "workers") and snapshot.inline_work
    assert snapshot.generation.sampling == Sampling()
    assert (snapshot.model, snapshot.trace, snapshot.layer, snapshot.head, snapshot.selected_token,
            snapshot.token_labels()) == (session.model, session.trace, session.layer, session.head,
                                         session.selected_token, session.token_labels())
    snapshot.set_layer(1)
    assert (snapshot.layer, session.layer) == (1, 0)
    snapshot.deleteLater()


def test_stage_views_read_only_the_view_state():
    """Every `session.X` a stage view reads is part of ViewState (HOST_ONLY: read only from a
    live session, guarded by `inline_work`)."""
    read = set()
    for path in STAGE_VIEWS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and (
                    (isinstance(node.value, ast.Name) and node.value.id == "session")
                    or (isinstance(node.value, ast.Attribute) and node.value.attr == "session")):
                read.add(node.attr)
    assert {"model", "shown_trace", "layer", "generation", "select_token"} <= read
    state = ViewState()
    missing = sorted(name for name in read - HOST_ONLY if not hasattr(state, name))
    assert missing == [], f"stage views read {missing}, which ViewState does not have"
    state.deleteLater()
