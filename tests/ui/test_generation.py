"""Generation in the window: next token / n tokens / until the end, undo, the user's own token
from the prediction plot, sampling with a seed, typing that stops a run, the context limit, and
encoders whose controls are disabled with the reason."""
import numpy as np
import pytest

from transformer_stepper.core.trace.generate import Sampling, generate
from transformer_stepper.state.generation import UNTIL_END_LIMIT

from .conftest import TEXT

TIMEOUT = 15_000


def open_model(qtbot, window, model_paths, kind):
    window.session.set_text(TEXT[kind], immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        window.session.open_model(str(model_paths[kind]))
    return window.session


def run(qtbot, session, start) -> None:
    """Start a run with `start()` and wait until it has ended."""
    control = session.generation
    assert start()
    qtbot.waitUntil(lambda: not control.running, timeout=TIMEOUT)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_generate_steps_mark_the_tokens_and_undo_cuts_back(qtbot, window, model_paths, kind):
    session = open_model(qtbot, window, model_paths, kind)
    bar, prompt = window.generate_bar, session.trace
    assert bar.next_action.isEnabled() and not bar.undo_action.isEnabled()
    bar.count_box.setValue(4)
    run(qtbot, session, lambda: (bar.many_action.trigger(), True)[1])
    trace = session.trace
    expected = generate(session.model, session.model.trace(TEXT[kind]), 4)[-1]   # greedy, in core
    np.testing.assert_array_equal(trace.input_ids, expected.input_ids)
    assert list(trace.generated) == [False] * prompt.n_seq + [True] * 4
    assert window.stepper.tokens.strip.generated == list(trace.generated)
    assert window.stepper.text_box.text() == trace.text == session.text and trace.text.startswith(prompt.text)
    assert session.selected_token == trace.n_seq - 1          # the newest token is selected
    assert trace.computed_rows == 1 and "reused the keys and values" in bar.status.text()
    # undo, twice: the trace cut back, the text with it
    for _ in range(2):                                    # (each cut in a worker)
        assert bar.undo_action.isEnabled()
        run(qtbot, session, lambda: (bar.undo_action.trigger(), True)[1])
    assert session.trace.n_seq == prompt.n_seq + 2
    np.testing.assert_array_equal(session.trace.input_ids, expected.input_ids[:prompt.n_seq + 2])
    assert window.stepper.text_box.text() == session.trace.text
    # the stepper redraws from the cut trace: an attention stage shows the new rows
    session.set_stage("softmax")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    assert view.cache_note.isHidden()                    # nothing computed by an undo's cut


def test_the_user_appends_a_token_from_the_prediction_plot(qtbot, window, model_paths):
    session = open_model(qtbot, window, model_paths, "gpt2")
    n = session.trace.n_seq
    session.set_stage("prediction")
    session.select_token(n - 1)
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    third = int(view._bar_ids[2])                          # the third most likely, not greedy's
    assert third != int(np.argmax(session.trace.logits[-1]))
    run(qtbot, session, lambda: (view.top.tokenClicked.emit(2), True)[1])
    assert session.trace.n_seq == n + 1 and int(session.trace.input_ids[-1]) == third
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    # the previous position's bars now name the chosen token
    session.select_token(n - 1)
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    assert "chose" in view.top.title and session.model.tokenizer.id_to_token(third) in view.top.title


def test_sampling_settings_seed_and_cut_offs(qtbot, window, model_paths):
    session = open_model(qtbot, window, model_paths, "gpt2")
    bar = window.generate_bar
    prompt = session.model.trace(TEXT["gpt2"])
    bar.temperature_box.setValue(1.5)
    bar.top_k_box.setValue(5)
    bar.seed_box.setValue(9)
    sampling = session.generation.sampling
    assert sampling == Sampling(temperature=1.5, top_k=5, top_p=1.0, seed=9)
    run(qtbot, session, lambda: session.generation.generate(3))
    first = session.trace.input_ids.copy()
    np.testing.assert_array_equal(first, generate(session.model, prompt, 3, sampling)[-1].input_ids)
    # undo all three and redo one at a time: the same tokens (seeded by position)
    for n in range(3):
        run(qtbot, session, lambda: session.generation.undo())   # (cut in a worker)
        assert session.trace.n_seq == len(first) - 1 - n
    for _ in range(3):
        run(qtbot, session, lambda: session.generation.generate(1))
    np.testing.assert_array_equal(session.trace.input_ids, first)
    # the prediction plot draws the top-k cut-off: five bars kept, the rest muted
    session.set_stage("prediction")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    assert view.cut_line.isVisible() and view.cut_line.value() == pytest.approx(4.5)
    assert "T 1.5, top-k 5" in view.top.title


def test_typing_stops_a_run_and_the_context_limit_stops_with_a_message(qtbot, window, model_paths):
    session = open_model(qtbot, window, model_paths, "gpt2")
    control = session.generation
    # the tiny GPT-2 reads 24 tokens: "until the end" stops there, saying why
    with qtbot.waitSignal(control.failed, timeout=TIMEOUT) as failed:
        assert control.generate_until_end()
    qtbot.waitUntil(lambda: not control.running, timeout=TIMEOUT)
    assert session.trace.n_seq == session.model.config.n_ctx
    assert "context is full" in failed.args[0]
    assert not window.generate_bar.next_action.isEnabled()
    assert "context is full" in window.generate_bar.toolTip()
    # typing a new text: traced from the text, no generated marks, generation possible again
    window.stepper.text_box.clear()
    qtbot.keyClicks(window.stepper.text_box, "the river")
    qtbot.waitUntil(lambda: session.trace is not None and session.trace.text == "the river",
                    timeout=TIMEOUT)
    assert not session.trace.generated.any() and window.generate_bar.next_action.isEnabled()
    assert control.generate(50)
    window.stepper.text_box.setText("")
    qtbot.keyClicks(window.stepper.text_box, "a boat")          # typing mid-run ends the run
    qtbot.waitUntil(lambda: not control.running and session.trace.text == "a boat", timeout=TIMEOUT)
    assert not session.trace.generated.any()
    assert UNTIL_END_LIMIT >= 50


def test_encoders_cannot_generate_and_say_why(qtbot, window, model_paths):
    session = open_model(qtbot, window, model_paths, "bert")
    bar = window.generate_bar
    assert not bar.next_action.isEnabled() and not bar.until_action.isEnabled()
    assert "cannot generate" in bar.toolTip() and "encoder" in bar.toolTip()
    assert not session.generation.generate(1)


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_the_logit_lens_stage_is_computed_in_a_worker_and_ends_at_the_prediction(qtbot, window,
                                                                                 model_paths, kind):
    session = open_model(qtbot, window, model_paths, kind)
    session.set_stage("logit_lens")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    trace, model = session.trace, session.model
    from transformer_stepper.core.trace.generate import lens_logits
    from transformer_stepper.core.model.ops import softmax

    # the table's colour is each state's top probability; its last row is the model's own
    table = view.table.values
    assert table.shape == (model.config.n_layer + 1, trace.n_seq)
    probabilities = softmax(trace.logits.astype(np.float64))
    np.testing.assert_allclose(table[-1], probabilities.max(-1), atol=1e-5)
    first = softmax(lens_logits(model, trace, 0).astype(np.float64))
    np.testing.assert_allclose(table[0], first.max(-1), atol=1e-5)
    # the curve: the final prediction's probability at every state, for the selected position
    i = session.selected_token
    final = int(np.argmax(trace.logits[i]))
    curve = view.curve.curves[0].y
    assert curve[-1] == pytest.approx(probabilities[i, final], abs=1e-5)
    assert curve[0] == pytest.approx(first[i, final], abs=1e-5)
    assert model.tokenizer.id_to_token(final) in view.curve.title


def test_a_failed_prediction_job_is_said_once_not_retried(qtbot, window, model_paths, monkeypatch):
    """Work a view computes in a worker (the predictions) that fails shows the error in the
    view's placeholder and is not started again for the same trace."""
    from transformer_stepper.ui.stages import prediction as prediction_module

    calls = []

    def failing(trace, top, model=None):
        calls.append(top)
        raise MemoryError()

    monkeypatch.setattr(prediction_module, "predictions", failing)
    session = open_model(qtbot, window, model_paths, "gpt2")
    session.set_stage("prediction")
    view = window.stepper.current_view()
    qtbot.waitUntil(lambda: "out of memory" in view.placeholder.text(), timeout=TIMEOUT)
    qtbot.wait(200)                                  # a retry loop would call it again here
    view.ensure_current()
    assert calls == [5] and view.placeholder.isVisible() and not view.is_current()
