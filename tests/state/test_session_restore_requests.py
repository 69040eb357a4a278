"""A saved session's trace (state/session_restore.py), restored on the session's ManualScheduler:
its text traced with the generated ids appended, only the latest restore heard, and a restore
dropped when another model opens or it is cancelled."""
from __future__ import annotations

import numpy as np

from tests.state.conftest import opened
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.state import session_restore


def heard(restore):
    log = []
    restore.events.traced.connect(lambda number, trace: log.append(("traced", number, trace)))
    restore.events.failed.connect(lambda number, message: log.append(("failed", number, message)))
    return log


def test_the_text_is_traced_with_the_generated_ids_appended(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"])
    model, restore = session.model, session.restore
    log = heard(restore)
    generated = tuple(int(i) for i in model.trace("the river bank").input_ids[-2:])
    number = restore.start(model, "the bank of", generated, layer=1)
    assert restore.busy and log == []
    scheduler.run_all()
    assert [(kind, n) for kind, n, _ in log] == [("traced", number)] and not restore.busy
    trace = log[0][2]
    typed = model.trace("the bank of")
    assert trace.n_seq == typed.n_seq + len(generated)
    assert tuple(int(i) for i in trace.input_ids[typed.n_seq:]) == generated
    assert np.array_equal(trace.input_ids[:typed.n_seq], typed.input_ids)
    assert trace.is_ready(1)


def test_only_the_latest_restore_is_heard_whichever_lands_first(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"])
    restore = session.restore
    log = heard(restore)
    for order in ((0, 1), (1, 0)):
        log.clear()
        first = restore.start(session.model, "the bank", (), 0)
        second = restore.start(session.model, "the river", (), 0)
        jobs = list(scheduler.jobs)
        for index in order:
            scheduler.run_next(scheduler.jobs.index(jobs[index]))
        assert [(kind, n) for kind, n, _ in log] == [("traced", second)], order
        assert log[0][2].text == "the river" and first != second


def test_another_model_opened_meanwhile_drops_the_restore(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"])
    log = heard(session.restore)
    session.restore.start(session.model, "the bank", (), 0)
    restoring = scheduler.jobs[-1]
    session.open_model(str(tiny_models["bert"]))
    loading = scheduler.jobs[-1]
    scheduler.run_next(scheduler.jobs.index(loading))        # the other model is in first
    assert session.model.config.family == "bert"
    scheduler.run_next(scheduler.jobs.index(restoring))      # then the old model's restore lands
    scheduler.run_all()
    assert log == [] and not session.restore.busy


def test_a_cancelled_restore_is_dropped_and_a_failure_heard_once(session, scheduler, tiny_models, monkeypatch):
    opened(session, scheduler, tiny_models["gpt2"])
    log = heard(session.restore)
    session.restore.start(session.model, "the bank", (), 0)
    session.restore.cancel()
    scheduler.run_all()
    assert log == []

    def broken(model, text, generated, layer):
        raise ModelError(f"cannot trace {text!r}")

    monkeypatch.setattr(session_restore, "restore_trace", broken)
    session.restore.start(session.model, "the bank", (), 0)
    latest = session.restore.start(session.model, "the river", (), 0)
    scheduler.run_all()
    assert log == [("failed", latest, "cannot trace 'the river'")]
