"""Help → Questions: a walk's step puts the window into its state (text, tab, stage, layer,
head, selected token, interventions) and its caption quotes the numbers of that state; Back,
Next and "Leave the walk here" (the window stays as the step left it)."""
from transformer_stepper.core.model.interventions import AblateHead

from .conftest import builtin_model_or_skip


def _open_builtin(qtbot, window):
    with qtbot.waitSignal(window.session.traceChanged, timeout=20_000):
        window.open_model(str(builtin_model_or_skip()))


def _caption_ready(qtbot, panel):
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.index == panel.index
                    and panel.caption.text() == panel.shown.caption, timeout=20_000)


def test_a_walk_sets_the_state_its_caption_quotes(qtbot, window):
    _open_builtin(qtbot, window)
    session, panel = window.session, window.walk_panel
    window.questions_action.trigger()
    assert panel.isVisible() and panel.question_list.count() >= 6
    walk = [w.key for w in panel.walks].index("05-weighted-sum-keeps-sources")
    panel.start(walk)
    _caption_ready(qtbot, panel)
    qtbot.waitUntil(lambda: session.selected_token == 11, timeout=10_000)     # "she"
    assert (session.stage_key, session.layer, session.head) == ("softmax", 1, 1)
    assert window.tabs.current_key() == "stepper"
    weights = session.trace.layer("attn_weights", 1)[1, 11]
    assert f"{weights.max():.3f}" in panel.caption.text() and "'queen'" in panel.caption.text()
    panel.next_button.click()
    _caption_ready(qtbot, panel)
    assert session.stage_key == "weighted_sum"
    for _ in range(4):                           # to the ablation step
        panel.next_button.click()
        _caption_ready(qtbot, panel)
    assert window.tabs.current_key() == "interventions"
    qtbot.waitUntil(lambda: session.interventions == (AblateHead(2, 0),), timeout=10_000)
    panel.back_button.click()
    _caption_ready(qtbot, panel)
    # back is the earlier step's state: no intervention there
    qtbot.waitUntil(lambda: session.interventions == (), timeout=10_000)
    assert session.stage_key == "output_projection" and window.tabs.current_key() == "stepper"
    panel.leave_button.click()
    assert not panel.isVisible()
    assert session.stage_key == "output_projection" and session.layer == 2      # the window stays there
