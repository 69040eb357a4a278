"""The views read a ViewState: the live Session is one (and hosts models besides), an export's
snapshot is one (and nothing more). A model and its trace change together: when modelChanged
is heard, the trace is the new model's or None, never the previous model's."""
import ast
from pathlib import Path

from transformer_stepper.core.generate import Sampling
from transformer_stepper.ui.export.snapshot import SnapshotSession
from transformer_stepper.ui.session import Session
from transformer_stepper.ui.view_state import ViewState

STAGE_VIEWS = Path(__file__).parents[2] / "desktop" / "transformer_stepper" / "ui" / "stages"
HOST_ONLY = {"workers"}      # logit_lens.py reads it only where `inline_work` is False


def _record(session, log):
    def seen(signal):
        return lambda *_: log.append((signal, session.model, session.trace))
    for name in ("modelChanged", "layerChanged", "headChanged", "stageChanged", "traceChanged"):
        getattr(session, name).connect(seen(name))


def _belongs(model, trace) -> bool:
    return trace is None or trace.config == model.config


def test_a_new_model_is_never_announced_with_the_old_models_trace(qtbot, open_session, model_paths):
    session = open_session("bert")
    old_trace, log = session.trace, []
    _record(session, log)
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.open_model(str(model_paths["gpt2"]))
    assert [signal for signal, *_ in log][:2] == ["modelChanged", "layerChanged"]
    assert all(trace is not old_trace and _belongs(model, trace) for _, model, trace in log)
    assert log[0][2] is session.trace is not None


def test_typing_while_a_model_opens_announces_no_trace_rather_than_the_old_one(qtbot, open_session,
                                                                               model_paths):
    session = open_session("bert")
    old_trace, log = session.trace, []
    _record(session, log)
    with qtbot.waitSignal(session.modelChanged, timeout=10_000):
        session.open_model(str(model_paths["gpt2"]))
        session.set_text("the river bank")              # the opened model traced the old text
    assert [entry for entry in log if entry[0] == "modelChanged"] == [("modelChanged", session.model, None)]
    qtbot.waitUntil(lambda: session.trace is not None and not session.busy, timeout=10_000)
    assert all(trace is not old_trace and _belongs(model, trace) for _, model, trace in log)
    assert session.trace is not None and session.trace.text == "the river bank"


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
