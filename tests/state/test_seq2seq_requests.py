"""The translation window's request logic without Qt (state/seq2seq.py on a ManualScheduler):
typing debounced into one trace of the last source, stale results dropped, a new model dropping
a pending trace, Translate after an edit translating the new source, a failure told once, in one
line, and only for the latest request; the Interventions page's passes as the window's requests
(the latest wins, clearing or a new trace drops the result, a hidden page computes nothing)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.core.model.interventions import AblateHead
from transformer_stepper.core.model.seq2seq_interventions import InStack, NoSourcePositions
from transformer_stepper.core.trace.seq2seq_generate import generate
from transformer_stepper.io.loader import load_model
from transformer_stepper.state.scheduler import ManualScheduler
from transformer_stepper.state.seq2seq import STEPS_TO_END, TranslationModel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MARIAN, T5 = str(FIXTURES / "marian_tiny"), str(FIXTURES / "t5_tiny")
DEBOUNCE = 200
SOURCE = "The bank of the river."


def heard(translation, name):
    """-> a list of the arguments of each `name` notification."""
    log = []
    getattr(translation.events, name).connect(lambda *args: log.append(args))
    return log


@pytest.fixture
def scheduler() -> ManualScheduler:
    return ManualScheduler()


@pytest.fixture
def translation(scheduler) -> TranslationModel:
    model = TranslationModel(scheduler, SOURCE, debounce_ms=DEBOUNCE)
    model.open_model(MARIAN)
    scheduler.run_all()
    assert model.trace is not None and model.traced_source == SOURCE
    return model


@pytest.fixture(scope="module")
def marian():
    """The fixture loaded apart from the state: what its traces should be."""
    return load_model(MARIAN)


def test_typing_is_debounced_into_one_trace_of_the_last_source(translation, scheduler, marian):
    traced = heard(translation, "traced")
    for source in ("The", "The money", "The money in the bank."):
        translation.edit_source(source)
        scheduler.advance(DEBOUNCE - 1)
    assert scheduler.idle, "nothing runs while the typing goes on"
    scheduler.advance(1)
    assert len(scheduler.jobs) == 1
    scheduler.run_all()
    assert traced == [(False, None)]
    assert translation.traced_source == translation.trace.source_text == "The money in the bank."
    np.testing.assert_array_equal(translation.trace.encoder.input_ids,
                                  marian.trace("The money in the bank.", "").encoder.input_ids)


def test_a_result_for_an_older_request_is_dropped(translation, scheduler):
    traced = heard(translation, "traced")
    translation.retrace()                                  # the old source
    translation.set_texts("A bank of snow.", "")
    translation.retrace()                                  # the latest
    scheduler.run_next()
    assert translation.traced_source == SOURCE and traced == [], "the older result is dropped"
    scheduler.run_next()
    assert translation.trace.source_text == translation.traced_source == "A bank of snow."
    assert len(traced) == 1


def test_a_new_model_drops_a_pending_trace(translation, scheduler):
    marian_model = translation.model
    traced = heard(translation, "traced")
    translation.retrace()                                  # running for the old model
    translation.edit_source("The money.")                  # and a re-trace waiting for the pause
    translation.open_model(T5)
    scheduler.advance(DEBOUNCE)
    assert len(scheduler.jobs) == 2, "the pause's re-trace does not start after the open"
    scheduler.run_all()
    assert traced == [(True, None)], "only the new model's trace is shown"
    assert translation.model is not marian_model and translation.path == T5
    assert translation.trace.source_text == "The money."


def test_translate_after_an_edit_translates_the_new_source(translation, scheduler, marian):
    targets = heard(translation, "targetChanged")
    translation.translate()
    scheduler.run_all()
    assert translation.target_generated and translation.trace.decoder.n_seq > 1
    new_source = "The money in the bank."
    translation.edit_source(new_source)
    assert targets == [("",)] and translation.target == "", \
        "the old translation went with its source"
    translation.translate()                                # at once, before the pause
    scheduler.advance(DEBOUNCE)
    assert len(scheduler.jobs) == 1, "the pause's re-trace was replaced by the translation"
    scheduler.run_all()
    assert translation.traced_source == translation.trace.source_text == new_source
    expected = generate(marian, marian.trace(new_source, ""), STEPS_TO_END)[-1]
    np.testing.assert_array_equal(translation.trace.decoder.input_ids, expected.decoder.input_ids)
    assert translation.target_generated


def test_a_typed_target_is_teacher_forced(translation, scheduler, marian):
    translation.edit_target("bank")
    scheduler.advance(DEBOUNCE)
    scheduler.run_all()
    assert not translation.target_generated
    expected = marian.trace(SOURCE, "bank")
    assert expected.decoder.n_seq > 1
    np.testing.assert_array_equal(translation.trace.decoder.input_ids, expected.decoder.input_ids)


def test_next_token_append_and_a_layer_change_extend_the_trace_shown(translation, scheduler):
    n = translation.trace.decoder.n_seq
    translation.next_token()
    scheduler.run_all()
    assert translation.trace.decoder.n_seq == n + 1
    translation.append_token(7)
    scheduler.run_all()
    assert translation.trace.decoder.n_seq == n + 2 and int(translation.trace.decoder.input_ids[-1]) == 7
    translation.set_layer(1)
    scheduler.run_all()
    assert translation.trace.encoder.is_ready(1) and translation.trace.decoder.is_ready(1)


def test_translate_when_open(scheduler):
    translation = TranslationModel(scheduler, SOURCE, debounce_ms=DEBOUNCE)
    translation.translate_when_open = True
    translation.open_model(MARIAN)
    scheduler.run_next()                                   # opened: the translation starts
    assert len(scheduler.jobs) == 1 and not translation.translate_when_open
    scheduler.run_all()
    assert translation.target_generated and translation.trace.decoder.n_seq > 1


def test_a_failure_is_one_line_and_only_for_the_latest_request(scheduler, tmp_path):
    translation = TranslationModel(scheduler, SOURCE, debounce_ms=DEBOUNCE)
    failed = heard(translation, "failed")
    missing = str(tmp_path / "no_such_model")
    translation.open_model(missing)
    translation.open_model(MARIAN)                         # the latest: the failure is stale
    scheduler.run_all()
    assert failed == [] and translation.trace is not None
    translation.open_model(missing)
    scheduler.run_all()
    assert len(failed) == 1
    (message,) = failed[0]
    assert "no_such_model" in message and "\n" not in message
    assert translation.path == MARIAN and translation.model is not None, \
        "the model open before stays (its trace is still shown)"


def test_shutdown_drops_what_runs(translation, scheduler):
    traced = heard(translation, "traced")
    translation.edit_source("The money.")
    translation.retrace()
    translation.shutdown()
    scheduler.advance(DEBOUNCE)
    scheduler.run_all()
    assert traced == [] and translation.traced_source == SOURCE


# -- the Interventions page's requests (state/seq2seq_interventions.py) --------------------------
CROSS, ENCODER = InStack("cross", AblateHead(1, 0)), InStack("encoder", AblateHead(0, 1))


def test_interventions_are_requests_of_the_window_numbered_with_its_own(translation, scheduler):
    intervening = translation.intervening
    intervening.add_head(CROSS)
    translation.retrace()
    numbers = [queued[0].number for queued in scheduler.jobs]
    assert len(numbers) == 2 and len(set(numbers)) == 2 and numbers == sorted(numbers)
    scheduler.run_all()
    assert intervening.result is not None and intervening.current is None, \
        "a result of the trace before is not the new trace's"
    assert not intervening.add_head(CROSS), "a head ablated once"


def test_only_the_latest_interventions_land_whatever_order(translation, scheduler):
    intervening = translation.intervening
    done = heard(intervening, "done")
    intervening.add_head(CROSS)
    intervening.add_head(ENCODER)                          # before the first lands
    scheduler.run_next(1)                                  # the latest first
    scheduler.run_all()
    assert len(done) == 1 and intervening.current is intervening.result
    intervened = intervening.result[0]
    assert intervened.interventions == (CROSS, ENCODER)
    np.testing.assert_array_equal(intervened.decoder.layer("cross_head_outputs", 1)[0], 0)
    assert intervening.result_for is translation.trace


def test_clearing_drops_the_pass_in_flight_and_says_whether_the_stages_showed_one(translation, scheduler):
    intervening = translation.intervening
    done, cleared = heard(intervening, "done"), heard(intervening, "cleared")
    intervening.set_no_positions(True)
    scheduler.run_all()
    assert intervening.interventions() == (NoSourcePositions(),) and len(done) == 1
    intervening.add_head(CROSS)
    intervening.clear()
    scheduler.run_all()
    assert intervening.result is None and len(done) == 1
    assert cleared == [(True,)]                            # the result it dropped was of this trace
    intervening.clear()
    assert cleared == [(True,), (False,)]


def test_a_new_trace_drops_the_result_and_recomputes_only_when_shown(translation, scheduler):
    intervening = translation.intervening
    intervening.add_head(CROSS)
    scheduler.run_all()
    result = intervening.result
    translation.set_layer(1)                               # the same pass, a layer prepared
    scheduler.run_all()
    assert intervening.trace_changed(showing=True) and intervening.result is result
    assert scheduler.idle
    translation.set_texts("A bank of snow.", "")
    translation.retrace()
    scheduler.run_all()
    assert not intervening.trace_changed(showing=False)
    assert intervening.result is None and scheduler.idle, "not computed while the page is hidden"
    intervening.wanted()                                   # the page comes on screen
    job = scheduler.jobs[0][0]
    assert job.args[1] is translation.trace and job.args[3] is None, \
        "another source: its clean translation is not the one known"
    scheduler.run_all()
    assert intervening.current is intervening.result and intervening.result_for.source_text == "A bank of snow."
    intervening.add_head(ENCODER)
    assert scheduler.jobs[0][0].args[3] == (intervening.result[2].clean_ids, intervening.result[2].clean_text), \
        "the same model and source: the clean translation is not computed again"


def test_an_interventions_failure_is_one_line_and_only_for_the_latest(translation, scheduler, monkeypatch):
    from transformer_stepper.core.model.errors import ModelError
    from transformer_stepper.state import seq2seq_work

    def failing(model, trace, interventions, clean):
        if NoSourcePositions() in interventions:
            raise ModelError("cannot remove\nthe positions")
        return real(model, trace, interventions, clean)

    real = seq2seq_work.intervene
    monkeypatch.setattr(seq2seq_work, "intervene", failing)
    intervening = translation.intervening
    failed = heard(intervening, "failed")
    intervening.set_no_positions(True)
    intervening.set_no_positions(False)
    intervening.add_head(CROSS)
    scheduler.run_all()
    assert failed == [] and intervening.result is not None
    intervening.set_no_positions(True)
    scheduler.run_all()
    assert failed == [("cannot remove the positions",)]


def test_shutdown_drops_the_interventions_in_flight(translation, scheduler):
    intervening = translation.intervening
    done = heard(intervening, "done")
    intervening.add_head(CROSS)
    translation.shutdown()
    scheduler.run_all()
    assert done == [] and intervening.result is None
