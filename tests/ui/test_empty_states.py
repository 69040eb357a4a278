"""Views with nothing to show yet say what to do (or why nothing applies) in a sentence, in place
of empty plots: Interventions before anything is switched off, Training before a run (and no word
labels piled on one point), Attribution on a post-LN model (no layer box left floating)."""
from __future__ import annotations

import pytest

TIMEOUT = 15_000


def test_interventions_before_any_head_is_ticked(qtbot, loaded_window):
    window = loaded_window("gpt2")
    view = window.tabs.show_tab("interventions")
    assert view.empty.isVisible() and "Tick a layer × head cell" in view.empty.text()
    assert not any(f.isVisible() for f in (view.changes, view.moved, view.stage_map))
    with qtbot.waitSignal(view.resultReady, timeout=TIMEOUT):
        view.set_head_ablated(0, 1)
    assert not view.empty.isVisible() and view.changes.isVisible() and view.stage_map.isVisible()
    view.clear_all()
    qtbot.waitUntil(lambda: view.empty.isVisible(), timeout=TIMEOUT)
    assert "Tick a layer × head cell" in view.empty.text()


def test_training_before_a_run_says_press_train(qtbot):
    from transformer_stepper.ui.training import TrainingView
    from transformer_stepper.ui.training.figures import EMPTY_MAP

    view = TrainingView(open_in_stepper=lambda path: None)
    qtbot.addWidget(view)
    view.show()
    figure = view.embedding
    assert figure.empty.isVisible() and figure.empty.textItem.toPlainText() == EMPTY_MAP.replace("\\n", "\n")
    assert figure.labelled and not any(item.isVisible() for item in figure.labelled.values())
    assert "press **Train**" in view.explanation.toMarkdown() or "press Train" in view.explanation.toPlainText()
    assert view.shutdown(10_000)


@pytest.mark.parametrize("kind", ["bert", "bert_nohead"])
def test_attribution_on_a_post_ln_model_says_why_not(qtbot, loaded_window, kind):
    window = loaded_window(kind)
    view = window.tabs.show_tab("attribution")
    assert view.message.isVisible() and "does not apply" in view.message.text()
    assert "post-LN" in view.message.text() and "pre-LN model" in view.message.text()
    assert not view.layer_box.isVisible() and not view.layer_label.isVisible()
    assert not any(f.isVisible() for f in (view.parts, view.heads, view.sizes, view.layers))


def test_attribution_on_a_pre_ln_model_offers_the_layer(qtbot, loaded_window):
    window = loaded_window("gpt2")
    view = window.tabs.show_tab("attribution")
    qtbot.waitUntil(lambda: view.decomposition is not None, timeout=TIMEOUT)
    assert view.layer_box.isVisible() and not view.message.isVisible() and view.parts.isVisible()
