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


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_stacked_bars_split_each_layer_into_heads_and_ffn(qtbot, loaded_window, kind):
    window = loaded_window(kind)
    session = window.session
    view = window.tabs.show_tab("attribution")
    qtbot.waitUntil(lambda: view.decomposition is not None, timeout=10_000)
    d, bars = view.decomposition, view.layers
    config = session.model.config
    assert bars.isVisible() and bars.bar_labels == ["embedding"] + [f"layer {l}" for l in range(config.n_layer)]
    assert bars.segment_names[1:1 + config.n_head] == [f"head {h}" for h in range(config.n_head)]
    assert bars.segment_names[-1] == "FFN" and ("W_O bias" in bars.segment_names) == config.o_bias
    # each layer's segments sum to its attention + feed-forward attribution; all bars to Σ parts
    np.testing.assert_allclose(bars.values[1:].sum(axis=1), d.contributions[1::2] + d.contributions[2::2],
                               atol=1e-5)
    assert bars.values[0].sum() == pytest.approx(d.contributions[0], abs=1e-7)
    assert bars.values.sum() == pytest.approx(float(d.contributions.sum()), abs=1e-5)
    assert bars.values.sum() + d.constant == pytest.approx(d.logit, abs=1e-5)
    np.testing.assert_array_equal(bars.values[1:, 1:1 + config.n_head], d.head_contributions)
    # drawn: positive segments stacked up from 0, negative ones down, each bar's net marked
    for layer in range(config.n_layer):
        row, start = bars.values[1 + layer], bars.bottoms[1 + layer]
        tops = start + row
        assert max(tops.max(), 0) == pytest.approx(row[row > 0].sum()) and min(tops.min(), 0) == pytest.approx(row[row < 0].sum())
    np.testing.assert_allclose(bars.net.getData()[1], bars.values.sum(axis=1))
    assert "1/" in bars.title and f"{d.scale:.4g}" in bars.title          # the final norm's scale
    # hover: the exact number of the segment under the cursor
    layer, head = config.n_layer - 1, int(np.argmax(np.abs(d.head_contributions[-1])))
    k = 1 + head
    middle = bars.bottoms[1 + layer, k] + bars.values[1 + layer, k] / 2
    text = bars.hover_at(1 + layer, middle)
    assert text.startswith(f"layer {layer} · head {head}: share of the logit = ")
    assert str(np.float32(d.head_contributions[layer, head])) in text
