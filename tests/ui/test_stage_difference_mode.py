"""The Stepper's "Show A − B": with a second model open against the current one, every stage view
draws its stage's difference from the two exact traces in place of its own figures (the values
drawn are trace A's array minus trace B's), follows the layer, head and a new text, says it waits
while B runs, and gives the view's own figures back when turned off; a model against itself
draws zeros. It is off and disabled without a second model, and one mode at a time with "Show
intervened"."""
import numpy as np

from tests.builders import random_params, tiny_config, tokenizer_for, write_npz_model
from transformer_stepper.core.model import stages
from transformer_stepper.core.model.interventions import AblateHead


def other_gpt2(tmp_path, seed=7):
    config = tiny_config("gpt2").replace(name="tiny-gpt2-other")
    return write_npz_model(tmp_path / f"other{seed}.npz", config, random_params(config, seed=seed),
                           tokenizer_for("gpt2"))


def compared(qtbot, window, path):
    window.compare_with(str(path))
    view = window.tabs.views["model_diff"]
    qtbot.waitUntil(lambda: view.state.result is not None, timeout=15_000)
    window.tabs.show_tab("stepper")
    return view


def shown_view(qtbot, window, key):
    session = window.session
    session.set_stage(key)
    view = window.stepper.views[key]
    qtbot.waitUntil(lambda: view.showing_difference and view.is_current(), timeout=15_000)
    return view


def panel_values(view, name):
    return dict(view.difference_mode.panel.figures())[f"difference_{name}"].values


def test_every_stage_shows_a_minus_b(qtbot, loaded_window, tmp_path):
    window = loaded_window("gpt2")
    session = window.session
    action = window.show_difference_action
    assert not action.isEnabled()                         # no second model yet
    two = compared(qtbot, window, other_gpt2(tmp_path))
    assert action.isEnabled()
    action.setChecked(True)
    assert session.show_difference and window.stepper.difference_banner.isVisible()
    trace_a, trace_b = two.state.result.trace_a, two.state.result.trace_b
    session.set_layer(1)
    session.set_head(2)
    view = shown_view(qtbot, window, "qkv")
    for name in ("q", "k", "v"):
        np.testing.assert_array_equal(panel_values(view, name),
                                      trace_a.head_array(name, 1, 2) - trace_b.head_array(name, 1, 2))
    assert not any(f.isVisible() for _, f in view.figures())      # its own figures give way
    view = shown_view(qtbot, window, "softmax")
    np.testing.assert_array_equal(panel_values(view, "attn_weights"),
                                  trace_a.head_array("attn_weights", 1, 2) - trace_b.head_array("attn_weights", 1, 2))
    view = shown_view(qtbot, window, "feed_forward")
    np.testing.assert_array_equal(panel_values(view, "mlp_out"),
                                  trace_a.layer("mlp_out", 1) - trace_b.layer("mlp_out", 1))
    view = shown_view(qtbot, window, "embedding")
    np.testing.assert_array_equal(panel_values(view, "token_embeddings"),
                                  trace_a["token_embeddings"] - trace_b["token_embeddings"])
    view = shown_view(qtbot, window, "tokenize")
    np.testing.assert_array_equal(panel_values(view, "input_ids_A"), np.ones((trace_a.n_seq, 1)))
    view = shown_view(qtbot, window, "prediction")
    assert panel_values(view, "top_tokens_A").shape == (trace_a.n_seq, 5)
    for stage in stages.available_stages(session.model.config):
        view = shown_view(qtbot, window, stage.key)
        if stage.key == "logit_lens":        # nothing of its own to subtract: one line says where to look
            assert view.placeholder.isVisible() and "Layer output" in view.placeholder.text()
        else:
            assert view.difference_mode.panel.isVisible() and view.difference_mode.panel.figures()
    window.stepper.update_explanation()
    assert "minus the same arrays in tiny-gpt2-other (B)" in window.stepper.explanation.shown_markdown
    # a new text: the views wait for B, then show the new pair
    session.set_stage("layer_output")
    session.set_text("the river bank of the money", immediate=True)
    qtbot.waitUntil(lambda: session.trace.text == session.text and two.state.result.trace_a is session.trace,
                    timeout=15_000)
    view = shown_view(qtbot, window, "layer_output")
    trace_a, trace_b = two.state.result.trace_a, two.state.result.trace_b
    assert trace_b.text == session.text
    np.testing.assert_array_equal(panel_values(view, "layer_out"),
                                  trace_a.layer("layer_out", 1) - trace_b.layer("layer_out", 1))
    # off: the view's own figures again
    action.setChecked(False)
    qtbot.waitUntil(lambda: view.is_current() and not view.showing_difference, timeout=15_000)
    assert not view.difference_mode.panel.isVisible() and view.figures()[0][1].isVisible()


def test_a_model_against_itself_shows_zero(qtbot, loaded_window, tmp_path):
    window = loaded_window("gpt2")
    session = window.session
    path = other_gpt2(tmp_path, seed=3)
    window.open_model(str(path))
    qtbot.waitUntil(lambda: session.model is not None and session.model.name == "tiny-gpt2-other"
                    and session.trace is not None, timeout=15_000)
    compared(qtbot, window, path)
    session.set_show_difference(True)
    for key, name in (("qkv", "q"), ("scores", "scores"), ("output_projection", "attn_out"),
                      ("layer_output", "layer_out")):
        view = shown_view(qtbot, window, key)
        values = panel_values(view, name)
        assert values.size and np.all(np.nan_to_num(values) == 0.0)
        assert "‖A − B‖ / ‖B‖ = 0," in dict(view.difference_mode.panel.figures())[f"difference_{name}"].title


def test_one_mode_at_a_time(qtbot, loaded_window, tmp_path):
    window = loaded_window("gpt2")
    session = window.session
    compared(qtbot, window, other_gpt2(tmp_path))
    session.set_interventions([AblateHead(0, 1)])
    session.set_show_intervened(True)
    session.set_show_difference(True)
    assert session.show_difference and not session.show_intervened
    session.set_show_intervened(True)
    assert session.show_intervened and not session.show_difference
    # closing B turns A − B off and disables it
    session.set_show_difference(True)
    window.tabs.views["model_diff"].state.close_other()
    assert not session.show_difference and not window.show_difference_action.isEnabled()


def test_the_two_models_tab_opens_the_stepper_in_a_minus_b(qtbot, loaded_window, tmp_path):
    window = loaded_window("gpt2")
    session = window.session
    two = compared(qtbot, window, other_gpt2(tmp_path))
    window.tabs.show_tab("model_diff")
    two._cell_clicked(1, list(two.drift_map.stages).index("attn_weights"))     # a cell of the drift map
    two.stepper_button.click()
    assert window.tabs.current_key() == "stepper" and session.show_difference
    assert (session.stage_key, session.layer) == ("softmax", 1)
    view = shown_view(qtbot, window, "softmax")
    trace_a, trace_b = two.state.result.trace_a, two.state.result.trace_b
    np.testing.assert_array_equal(panel_values(view, "attn_weights"),
                                  trace_a.head_array("attn_weights", 1, session.head)
                                  - trace_b.head_array("attn_weights", 1, session.head))


def test_alt_click_on_a_difference_explains_it_in_both_models(qtbot, loaded_window, tmp_path):
    window = loaded_window("gpt2")
    session = window.session
    two = compared(qtbot, window, other_gpt2(tmp_path))
    session.set_show_difference(True)
    session.set_layer(1)
    session.set_head(2)
    view = shown_view(qtbot, window, "qkv")
    figure = dict(view.difference_mode.panel.figures())["difference_q"]
    figure.cellClicked.emit(3, 5)                         # what an Alt-click on (token 3, dim 5) emits
    panel = window.provenance_panel
    d = panel.difference
    trace_a, trace_b = two.state.result.trace_a, two.state.result.trace_b
    assert d is not None and panel.address == ("q", (1, 2, 3, 5))
    assert d.difference == float(trace_a.head_array("q", 1, 2)[3, 5]) - float(trace_b.head_array("q", 1, 2)[3, 5])
    assert d.difference == float(figure.values[3, 5]) or np.isclose(d.difference, figure.values[3, 5], rtol=1e-6)
    assert d.n_terms == trace_a.layer("attn_in", 1)[3].size and d.terms[0].label.startswith("x[")
    assert "A − B" in panel.body.toPlainText() and panel.check.text().count("✓") == 1
    # a figure whose values neither model computed: one line saying why, no explanation
    view = shown_view(qtbot, window, "prediction")
    figure = dict(view.difference_mode.panel.figures())["difference_kl"]
    figure.cellClicked.emit(1, 0)
    assert view.readout.text().startswith("A − B: KL per position is computed from both")
    # A − B off: an Alt-click explains A's value alone again
    session.set_show_difference(False)
    session.request_provenance("q", (1, 2, 3, 5))
    assert panel.difference is None and panel.explanation is not None
