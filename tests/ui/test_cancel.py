"""Workers report progress and can be cancelled: a forward pass reports each layer, and a new
text cancels the pass still running for an old one, which stops at its next layer."""
import threading

import numpy as np
import pytest

from tests.core.test_forward import make_model
from transformer_stepper.state import session as session_module
from transformer_stepper.state.jobs import compute_trace
from transformer_stepper.ui.workers import Task, WorkerPool


def test_the_pass_reports_every_layer_and_stops_where_the_report_raises():
    model = make_model("gpt2")
    seen = []
    model.trace("the bank of the river", after_layer=seen.append)
    assert seen == list(range(model.config.n_layer))

    class Stop(Exception):
        pass

    def stop_after_first(layer):
        if layer == 0:
            raise Stop()

    with pytest.raises(Stop):
        model.trace("the bank of the river", after_layer=stop_after_first)


def test_a_cancelled_task_ends_with_cancelled_not_finished(qtbot):
    model = make_model("gpt2")
    pool = WorkerPool()
    release = threading.Event()
    ended = {"finished": [], "cancelled": [], "progress": []}

    def slow(model, text, layer, progress):
        def gated(done, total):
            release.wait(10)
            progress(done, total)
        return compute_trace(model, text, layer, progress=gated)

    task = Task(7, slow, model, "the bank", 0, reports=True)
    pool.start(task, lambda i, r: ended["finished"].append(i), lambda *a: None,
               lambda i, d, t: ended["progress"].append((d, t)), ended["cancelled"].append)
    task.cancel()
    release.set()
    qtbot.waitUntil(lambda: ended["cancelled"] == [7], timeout=10_000)
    assert pool.wait(10_000)
    assert ended["finished"] == [] and ended["progress"] == []

    done = Task(8, compute_trace, model, "the bank", 0, reports=True)
    pool.start(done, lambda i, r: ended["finished"].append(i), lambda *a: None,
               lambda i, d, t: ended["progress"].append((d, t)), ended["cancelled"].append)
    qtbot.waitUntil(lambda: ended["finished"] == [8], timeout=10_000)
    n = model.config.n_layer
    assert ended["progress"] == [(k, n) for k in range(1, n + 1)]
    assert pool.wait(10_000)


def test_a_new_text_cancels_the_pass_running_for_the_old_one(qtbot, open_session, monkeypatch):
    session = open_session("gpt2")
    first_text, latest = "the river bank was", "the money bank is"
    release = threading.Event()
    passes = []

    def gated_compute(model, text, layer, previous, detail_budget, progress):
        def gate(done, total):
            if text == first_text:
                release.wait(10)         # the old pass is still running when the user types
            progress(done, total)
        passes.append(text)
        return compute_trace(model, text, layer, previous, detail_budget, progress=gate)

    monkeypatch.setattr(session_module, "compute_trace", gated_compute)
    shown = []
    session.traceChanged.connect(lambda: shown.append(session.trace.text))
    session.set_text(first_text, immediate=True)
    running = session._compute_task
    session.set_text(latest, immediate=True)      # cancels the running pass
    assert running.cancelled
    release.set()
    qtbot.waitUntil(lambda: session.trace.text == latest and not session.busy, timeout=10_000)
    assert passes == [first_text, latest] and shown == [latest]
    np.testing.assert_array_equal(session.trace.input_ids, session.model.trace(latest).input_ids)


def test_typing_on_at_the_end_computes_only_the_new_tokens(qtbot, open_session):
    """A decoder's next trace starts from the one on screen: the new text's tokens after the
    last shared one are computed, and the trace equals a fresh one of the new text."""
    session = open_session("gpt2")
    before = session.trace
    text = session.text + " bank"
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text(text, immediate=True)
    trace = session.trace
    assert trace.text == text and trace.computed_rows == trace.n_seq - before.n_seq >= 1
    assert session.layer_ready(), "the layer on screen came with the trace"
    fresh = session.model.trace(text)
    np.testing.assert_allclose(trace.hidden_states, fresh.hidden_states, atol=1e-5)
