"""The live session's request logic without Qt (state/session.py on a ManualScheduler): nothing
runs until the test says so, so every ordering is reproduced exactly, in milliseconds."""
import numpy as np

from tests.state.conftest import DEBOUNCE_MS, heard, opened


def _belongs(model, trace) -> bool:
    return trace is None or trace.config == model.config


def test_typing_is_debounced_into_one_pass_for_the_last_text(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"])
    for text in ("the bank", "the bank of", "the bank of the"):
        session.set_text(text)
        scheduler.advance(DEBOUNCE_MS - 1)
    assert scheduler.idle, "no pass before the typing rests"
    scheduler.advance(1)
    assert len(scheduler.jobs) == 1
    scheduler.run_all()
    assert session.trace.text == "the bank of the"


def test_a_new_text_cancels_the_running_pass_and_the_latest_text_runs_when_it_stops(
        session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["bert"])
    shown = heard(session, "traceChanged")
    session.set_text("the river bank was", immediate=True)
    running = session._compute_task
    session.set_text("the money bank is", immediate=True)      # while the first is running
    assert running.cancelled and len(scheduler.jobs) == 1, "one pass at a time"
    scheduler.run_next()                                         # stops at its first layer
    assert shown == [] and session.busy
    scheduler.run_all()                                          # then the latest text runs
    assert [trace.text for _, _, trace, _ in shown] == ["the money bank is"]
    np.testing.assert_array_equal(session.trace.input_ids,
                                  session.model.trace("the money bank is").input_ids)
    assert not session.busy


def test_texts_set_one_after_another_show_only_the_last(session, scheduler, tiny_models):
    # each text starts a pass or cancels the running one; only the latest text's trace lands
    # (was tests/ui/test_interaction.py's test_stale_results_are_dropped, on real threads: the
    # thread path of the same rule is tests/ui/test_cancel.py's)
    opened(session, scheduler, tiny_models["gpt2"])
    shown = heard(session, "traceChanged")
    for text in ("the bank", "the bank of", "the bank of the river"):
        session.set_text(text, immediate=True)
    assert len(scheduler.jobs) == 1, "one pass at a time"
    scheduler.run_all()
    assert [trace.text for _, _, trace, _ in shown] == ["the bank of the river"]
    assert session.trace.text == "the bank of the river" and not session.busy


def test_a_stale_model_never_lands(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["bert"])
    session.open_model(str(tiny_models["gpt2"]))
    session.open_model(str(tiny_models["bert"]))                # changed their mind
    scheduler.run_next()                                         # the GPT-2 lands first: stale
    assert session.model.config.name == "tiny-bert" and session.busy
    scheduler.run_all()
    assert session.model_path == str(tiny_models["bert"]) and not session.busy


def test_a_new_model_is_never_announced_with_the_old_models_trace(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["bert"])
    old_trace = session.trace
    log = heard(session, "modelChanged", "layerChanged", "headChanged", "stageChanged", "traceChanged")
    session.open_model(str(tiny_models["gpt2"]))
    scheduler.run_all()
    assert [name for name, *_ in log][:2] == ["modelChanged", "layerChanged"]
    assert all(trace is not old_trace and _belongs(model, trace) for _, model, trace, _ in log)
    assert log[0][2] is session.trace is not None


def test_typing_while_a_model_opens_announces_no_trace_rather_than_the_old_one(
        session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["bert"])
    old_trace = session.trace
    log = heard(session, "modelChanged", "traceChanged")
    session.open_model(str(tiny_models["gpt2"]))
    session.set_text("the river bank")                          # the opening model traces the old text
    scheduler.run_next()
    assert [entry[:3] for entry in log if entry[0] == "modelChanged"] == [("modelChanged", session.model, None)]
    scheduler.advance(DEBOUNCE_MS)
    scheduler.run_all()
    assert all(trace is not old_trace and _belongs(model, trace) for _, model, trace, _ in log)
    assert session.trace.text == "the river bank"


def test_a_failed_open_keeps_the_model_text_and_trace(session, scheduler, tiny_models, tmp_path):
    opened(session, scheduler, tiny_models["gpt2"])
    model, trace, text = session.model, session.trace, session.text
    failures = heard(session, "openFailed")
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip")
    session.open_model(str(broken))
    scheduler.run_all()
    assert len(failures) == 1 and "broken.npz" in failures[0][3][0]
    assert (session.model, session.trace, session.text) == (model, trace, text) and not session.busy


def test_the_intervened_pass_follows_a_new_clean_trace_and_a_stale_one_is_dropped(
        session, scheduler, tiny_models):
    from transformer_stepper.core.model.interventions import AblateHead
    opened(session, scheduler, tiny_models["gpt2"])
    session.set_interventions([AblateHead(layer=0, head=1)])
    stale_clean = session.trace
    session.set_text("the river of the bank", immediate=True)    # before the intervened pass ran
    scheduler.run_all()
    assert session.intervention is not None
    assert session.intervention.clean is session.trace is not stale_clean
    assert session.intervened_trace.text == "the river of the bank"
    session.set_show_intervened(True)
    assert session.shown_trace is session.intervened_trace
    session.set_interventions([])
    assert session.shown_trace is session.trace and not session.show_intervened


def test_freed_memory_goes_back_only_for_a_big_trace_once_the_workers_rest(
        session, scheduler, tiny_models, monkeypatch):
    from transformer_stepper.state import session as session_module
    trims = []
    monkeypatch.setattr(session_module, "return_freed_memory", lambda: trims.append(scheduler.idle))
    opened(session, scheduler, tiny_models["gpt2"])
    scheduler.advance(session_module.RETURN_MEMORY_AFTER_MS)
    assert trims == [], "a small trace keeps its heap"
    monkeypatch.setattr(session_module, "RETURN_MEMORY_FROM", 1)
    session.set_text("the bank of the river bank", immediate=True)
    scheduler.run_all()
    scheduler.advance(session_module.RETURN_MEMORY_AFTER_MS - 1)
    assert trims == []
    scheduler.advance(1)
    assert trims == [True]


def test_the_next_layer_is_prepared_only_when_it_fits_beside_the_shown_one(session, scheduler, tiny_models):
    # prefetching a layer the budget cannot hold beside the shown one would evict the shown
    # one, and its views would compute it again on the GUI thread
    opened(session, scheduler, tiny_models["gpt2"])
    trace = session.trace
    one_layer = trace.detail(0).nbytes()
    for budget, prefetched in ((3 * one_layer, True), (one_layer + one_layer // 2, False)):
        session.set_detail_budget(budget)
        session.set_layer(1)
        scheduler.run_all()
        trace.cache.clear()
        session.set_layer(0)                      # layer 0 computed; layer 1 only if it fits
        scheduler.run_all()
        assert trace.is_ready(0), "the shown layer"
        assert trace.is_ready(1) == prefetched, budget


def test_intervention_requests_rest_into_one_pass_and_a_new_model_drops_them(session, scheduler,
                                                                             tiny_models):
    # the Interventions tab's controls: several ticks in a row run one intervened pass, for the
    # last set; a model opened meanwhile drops the request (its heads mean nothing there)
    from transformer_stepper.core.model.interventions import AblateHead
    from transformer_stepper.state.shown_trace import INTERVENTIONS_DEBOUNCE_MS
    opened(session, scheduler, tiny_models["gpt2"])
    changes = heard(session, "interventionsChanged")
    session.request_interventions((AblateHead(0, 0),))
    scheduler.advance(INTERVENTIONS_DEBOUNCE_MS - 1)
    session.request_interventions((AblateHead(0, 0), AblateHead(0, 1)))
    scheduler.advance(INTERVENTIONS_DEBOUNCE_MS - 1)
    assert session.interventions == () and changes == [], "nothing while the controls move"
    scheduler.advance(1)
    assert session.interventions == (AblateHead(0, 0), AblateHead(0, 1)) and len(changes) == 1
    scheduler.run_all()
    assert session.intervention is not None
    session.request_interventions((AblateHead(1, 0),))
    session.open_model(str(tiny_models["gpt2"]))
    scheduler.run_all()
    scheduler.advance(INTERVENTIONS_DEBOUNCE_MS)
    assert session.interventions == (), "the request for the old model was dropped"
