"""Greedy decoding on the built-in model falls into a loop; the Generate toolbar says so and why
(tooltip), pointing at sampling."""
from .conftest import builtin_model_or_skip

TIMEOUT = 30_000


def test_a_greedy_loop_is_named_with_the_way_out(qtbot, window):
    session = window.session
    session.set_text("The queen rode to the bank of the river and she was tired", immediate=True)
    with qtbot.waitSignal(session.traceChanged, timeout=TIMEOUT):
        session.open_model(str(builtin_model_or_skip()))
    bar, control = window.generate_bar, session.generation
    bar.until_action.trigger()                     # greedy, to the end of the context
    qtbot.waitUntil(lambda: not control.running, timeout=TIMEOUT)
    generated = [int(t) for t, g in zip(session.trace.input_ids, session.trace.generated) if g]
    last = generated[-32:]                         # a word or two repeated three times in a row
    assert any(last[i:i + p] * 3 == last[i:i + 3 * p] for p in (1, 2, 3) for i in range(len(last) - 3 * p + 1)), \
        session.trace.text
    assert "a loop:" in bar.status.text() and "T > 0" in bar.status.text()
    assert "Sampling" in bar.status.toolTip() and "greedy" in bar.status.toolTip().lower()
