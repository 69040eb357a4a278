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


def test_a_closed_walk_sets_nothing_again_and_gives_the_user_state_back(qtbot, window):
    """Two steps of walk 6, close the dock: the user's sentence, stage, layer and head come back;
    typing a sentence and opening the built-in model then leaves them alone (the closed walk
    re-applied its last step whenever a model opened). The order of a walk's requests, and the
    user's state kept and given back once, are tests/state/test_walk_requests.py's; every step
    of every walk is applied in tests/ui/test_walks_draw.py."""
    _open_builtin(qtbot, window)
    session, panel = window.session, window.walk_panel
    mine = "the king saw the river"
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text(mine, immediate=True)
    session.set_stage("embedding")
    session.select_token(2)
    window.questions_action.trigger()
    panel.start([w.key for w in panel.walks].index("06-unseen-sentence"))
    _caption_ready(qtbot, panel)
    panel.next_button.click()
    _caption_ready(qtbot, panel)
    assert session.text != mine and session.stage_key == "scores"
    panel.close()                                        # the dock's close button
    assert not panel.isVisible() and panel.walk is None
    qtbot.waitUntil(lambda: session.trace is not None and session.trace.text == mine, timeout=10_000)
    assert (session.stage_key, session.layer, session.head) == ("embedding", 0, 0)
    qtbot.waitUntil(lambda: session.selected_token == 2, timeout=10_000)
    typed = "a girl met the prince"
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text(typed, immediate=True)
    with qtbot.waitSignal(session.traceChanged, timeout=20_000):
        window.open_model(str(builtin_model_or_skip()))
    qtbot.wait(300)                                      # a walk's worker would answer by now
    assert session.text == typed and session.stage_key == "embedding"
    assert not panel.isVisible()


def test_leaving_keeps_the_walk_state_and_the_list_gives_the_user_state_back(qtbot, window):
    _open_builtin(qtbot, window)
    session, panel = window.session, window.walk_panel
    mine = session.text
    walk = [w.key for w in panel.walks].index("06-unseen-sentence")
    panel.start(walk)
    _caption_ready(qtbot, panel)
    walked = session.text
    assert walked != mine
    panel.leave_button.click()
    assert not panel.isVisible() and panel.walk is None
    assert session.text == walked and session.stage_key == "qkv"      # left as the step left it
    panel.start(walk)
    _caption_ready(qtbot, panel)
    panel.list_button.click()                            # "All questions": the walk ended
    qtbot.waitUntil(lambda: session.text == walked and session.stage_key == "qkv", timeout=10_000)


def test_the_selection_is_the_token_the_caption_speaks_of(qtbot, window):
    _open_builtin(qtbot, window)
    session, panel = window.session, window.walk_panel
    session.select_token(2)                              # 'queen' in the default sentence
    panel.start([w.key for w in panel.walks].index("03-one-word-many-embeddings"))
    _caption_ready(qtbot, panel)
    panel.next_button.click()
    _caption_ready(qtbot, panel)
    panel.next_button.click()                            # step 3: the repeated token
    _caption_ready(qtbot, panel)
    first = panel.shown.numbers["first_at"]
    qtbot.waitUntil(lambda: session.selected_token == first, timeout=10_000)
    assert session.token_labels()[first] == panel.shown.numbers["repeated"]
