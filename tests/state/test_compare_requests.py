"""Compare's request logic without Qt (state/compare.py on a ManualScheduler): debounce, one task
at a time with the latest input next, stale results dropped, a layer change re-reading only the
attention rows, a new model emptying the cache."""
from __future__ import annotations

import numpy as np
import pytest

from tests.state.conftest import opened
from transformer_stepper.state.compare import CompareModel

DEBOUNCE = 30
SENTENCES = ["the bank of the river", "the money in the bank"]


def heard(compare, name):
    """-> a list of the arguments of each `name` notification."""
    log = []
    getattr(compare.events, name).connect(lambda *args: log.append(args))
    return log


@pytest.fixture
def compare(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["bert"])
    model = CompareModel(session, scheduler, debounce_ms=DEBOUNCE)
    model.set_active(True)
    return model


def test_typing_is_debounced_into_one_task_for_the_last_lines(compare, scheduler):
    compare.set_word("bank", immediate=True)
    scheduler.run_all()
    for lines in (["the bank"], ["the bank", "the bank of"], SENTENCES):
        compare.set_lines(lines)
        scheduler.advance(DEBOUNCE - 1)
    assert scheduler.idle, "nothing runs while the typing goes on"
    scheduler.advance(1)
    assert len(scheduler.jobs) == 1
    scheduler.run_all()
    assert compare.result.request.texts == tuple(SENTENCES)
    assert len(compare.comparison.occurrences) == 2


def test_one_task_at_a_time_and_the_latest_input_runs_next(compare, scheduler):
    results = heard(compare, "resultChanged")
    compare.load("bank", SENTENCES)
    assert len(scheduler.jobs) == 1
    compare.set_lines(SENTENCES + ["a bank of snow"], immediate=True)   # while the first runs
    assert len(scheduler.jobs) == 1, "one task at a time"
    scheduler.run_next()              # the first lands: no longer the latest input, dropped
    assert compare.result is None and results == []
    assert len(scheduler.jobs) == 1, "the latest input runs when the first has ended"
    scheduler.run_all()
    assert compare.result.request.texts == tuple(SENTENCES) + ("a bank of snow",)
    assert len(results) == 1


def test_traces_are_cached_per_text_and_a_new_model_empties_the_cache(compare, session, scheduler,
                                                                     tiny_models):
    compare.load("bank", SENTENCES)
    scheduler.run_all()
    assert compare.result.traced == 2
    compare.set_lines(SENTENCES + ["a bank of snow"], immediate=True)
    scheduler.run_all()
    assert compare.result.traced == 1, "only the new sentence is traced"
    session.open_model(str(tiny_models["gpt2"]))
    scheduler.run_all()
    compare.on_model()                   # the binder's call when the session's model changes
    scheduler.run_all()
    assert compare.result.request.model is session.model
    assert compare.result.traced == 3, "another model's traces are not reused"


def test_a_layer_change_reads_the_attention_rows_again_and_keeps_the_comparison(compare, session,
                                                                               scheduler):
    compare.load("bank", SENTENCES)
    scheduler.run_all()
    before = compare.result
    changes = heard(compare, "resultChanged")
    session.set_layer(1)
    compare.on_layer(1)
    scheduler.run_all()
    after = compare.result
    assert after.comparison is before.comparison and after.traced == 0
    assert changes == [(False,)], "the comparison itself did not change"
    occurrence = after.comparison.occurrences[0]
    trace = after.comparison.sentences[occurrence.sentence].trace
    np.testing.assert_array_equal(after.attention[0],
                                  trace.layer("attn_weights", 1)[:, occurrence.position])
    assert not np.array_equal(after.attention[0], before.attention[0])


def test_an_inactive_view_computes_nothing_until_shown(compare, scheduler):
    compare.set_active(False)
    compare.load("bank", SENTENCES)
    assert scheduler.idle
    compare.set_active(True)
    scheduler.run_all()
    assert compare.result is not None


def test_a_failure_is_one_line_and_only_for_the_latest_request(compare, scheduler, monkeypatch):
    failures = heard(compare, "failed")
    import transformer_stepper.state.compare as state_compare

    def broken(request):
        raise ValueError("no such thing")

    monkeypatch.setattr(state_compare, "run_request", broken)
    compare.load("bank", SENTENCES)
    scheduler.run_all()
    assert failures == [("comparing failed: ValueError: no such thing",)]
