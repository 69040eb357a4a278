"""Generation's run logic without Qt (state/generation.py on a ManualScheduler): one step at a
time, each landing as the session's trace; typing or a new model ends a run and drops the step in
flight; undo cuts the last generated token; an encoder refuses, saying why."""
from __future__ import annotations

import numpy as np

from tests.state.conftest import opened
from transformer_stepper.state.generation import GenerationModel


def heard(generation, name):
    log = []
    getattr(generation.events, name).connect(lambda *args: log.append(args))
    return log


def test_n_tokens_run_one_step_at_a_time_each_landing_as_the_trace(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"], "the bank of")
    generation = GenerationModel(session)
    stepped = heard(generation, "stepped")
    start = session.trace.n_seq
    assert generation.generate(3) and generation.running
    for done in range(1, 4):
        assert len(scheduler.jobs) == 1, "one step at a time"
        scheduler.run_next()
        assert session.trace.n_seq == start + done
    assert not generation.running and generation.done == 3
    trace = session.trace
    assert [args[0] for args in stepped] == [int(i) for i in trace.input_ids[start:]]
    np.testing.assert_array_equal(trace.generated, [False] * start + [True] * 3)
    whole = session.model.trace_encoded(_encoded_of(trace))     # the whole text in one pass
    np.testing.assert_allclose(trace.hidden_states, whole.hidden_states, atol=1e-5)


def _encoded_of(trace):
    from transformer_stepper.core.model.tokenize import Encoded
    return Encoded(tokens=trace.tokens, input_ids=trace.input_ids,
                   token_type_ids=trace.arrays["token_type_ids"], offsets=trace.offsets,
                   special_tokens_mask=trace.special_tokens_mask, truncated=False)


def test_typing_ends_the_run_and_the_step_in_flight_is_dropped(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"], "the bank of")
    generation = GenerationModel(session)
    before = session.trace
    generation.generate(5)
    session.set_text("the river", immediate=True)
    generation.on_text("the river")              # the binder's call when the text is set
    assert not generation.running and generation.left == 0
    scheduler.run_all()
    assert session.trace.text == "the river", "the step for the old text did not land"
    assert session.trace is not before and not session.trace.generated.any()


def test_a_new_model_stops_the_run(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"], "the bank of")
    generation = GenerationModel(session)
    generation.generate(5)
    session.open_model(str(tiny_models["gpt2"]))
    generation.stop()                             # the binder's call when the model changes
    scheduler.run_all()
    assert not generation.running and not session.trace.generated.any()


def test_undo_cuts_the_last_generated_token(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["gpt2"], "the bank of")
    generation = GenerationModel(session)
    start = session.trace.n_seq
    generation.generate(2)
    scheduler.run_all()
    grown = session.trace
    assert generation.can_undo() and generation.undo()
    scheduler.run_all()
    assert session.trace.n_seq == start + 1
    np.testing.assert_array_equal(session.trace.input_ids, grown.input_ids[:start + 1])
    np.testing.assert_array_equal(session.trace.hidden_states, grown.hidden_states[:, :start + 1])


def test_an_encoder_cannot_generate_and_says_why(session, scheduler, tiny_models):
    opened(session, scheduler, tiny_models["bert"])
    generation = GenerationModel(session)
    assert not generation.generate(1) and scheduler.idle
    assert "cannot generate" in generation.why_not() and "encoder" in generation.why_not()
