"""The Attribution tab shows, at the selected token, each part's direct attribution summing to
the traced logit, follows the selection, and says why a post-LN model is not decomposed."""
import numpy as np
import pytest


def test_attribution_follows_the_selection_and_sums_to_the_logit(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    view = window.tabs.show_tab("attribution")
    qtbot.waitUntil(lambda: view.decomposition is not None, timeout=10_000)
    d = view.decomposition
    assert d.position == session.selected_token
    logits = session.trace.logits[d.position]
    assert d.token_id == int(np.argmax(logits))
    assert float(view.parts.values.sum()) + d.constant == pytest.approx(float(logits[d.token_id]), abs=1e-4)
    assert view.heads.values.shape == (session.model.config.n_layer, session.model.config.n_head)
    target = 1 if d.position != 1 else 2
    session.select_token(target)
    assert view.decomposition.position == target
    view.layer_box.setCurrentIndex(0)                          # the stream after layer 0
    assert len(view.sizes.values) == 3 and view.decomposition.layer == 0


def test_post_ln_models_say_why_there_is_no_decomposition(qtbot, loaded_window):
    window = loaded_window("bert")
    view = window.tabs.show_tab("attribution")
    qtbot.waitUntil(lambda: "post-LN" in view.message.text(), timeout=10_000)
    assert view.decomposition is None and view.parts.isHidden()
