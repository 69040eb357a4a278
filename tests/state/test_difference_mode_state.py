"""The session's A − B mode without Qt (state/session.py): the stage views draw B's trace
against the session's trace only while the user shows it and only for the current trace (a new
text waits for B's), it needs a second model, and it is one mode at a time with the intervened
pass."""
from tests.state.conftest import heard, opened
from transformer_stepper import load_model
from transformer_stepper.core.model.interventions import AblateHead


def test_a_minus_b_follows_the_current_trace(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"])
    log = heard(session, "differenceChanged", "shownTraceChanged")
    session.set_show_difference(True)
    assert not session.show_difference and log == []          # no second model yet
    trace_b = load_model(tiny_models["gpt2"]).trace(session.text)
    session.set_against(session.trace, trace_b, "B")
    assert session.can_show_difference and session.against is None     # not shown yet
    session.set_show_difference(True)
    assert session.against is trace_b and not session.waiting_for_against
    assert [name for name, *_ in log][-2:] == ["differenceChanged", "shownTraceChanged"]
    session.set_text("the river bank", immediate=True)
    scheduler.run_all()                                       # A's new trace, B's not in yet
    assert session.against is None and session.waiting_for_against
    session.set_against(session.trace, load_model(tiny_models["gpt2"]).trace(session.text), "B")
    assert session.against is not None and session.against.text == "the river bank"
    session.set_against(None, None)                           # B closed or refused
    assert not session.show_difference and not session.can_show_difference


def test_one_mode_at_a_time(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"])
    session.set_against(session.trace, load_model(tiny_models["gpt2"]).trace(session.text), "B")
    session.set_interventions([AblateHead(0, 1)])
    scheduler.run_all()
    session.set_show_intervened(True)
    session.set_show_difference(True)
    assert session.show_difference and not session.show_intervened
    session.set_show_intervened(True)
    assert session.show_intervened and not session.show_difference and session.against is None


def test_the_two_models_tab_refuses_an_encoder_decoder_in_one_line(scheduler, tiny_models):
    from pathlib import Path
    from transformer_stepper.state.model_diff import TwoModels

    model_a = load_model(tiny_models["gpt2"])
    state = TwoModels(scheduler)
    t5 = Path(__file__).resolve().parents[1] / "fixtures" / "t5_tiny"
    state.open_other(str(t5), model_a, model_a.trace("the bank"))
    scheduler.run_all()
    assert state.result is None and "\n" not in state.message
    assert "an encoder–decoder model" in state.message and "transformer-stepper diff" in state.message
