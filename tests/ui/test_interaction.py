"""Selection linked everywhere, live typing with stale results dropped, the temperature
what-if, hover values, and failing opens that keep the old model, text and stage."""
import numpy as np
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QMessageBox

from transformer_stepper.ui.stages.softmax import temperature_to_slider


def test_selecting_a_token_changes_dependent_plots_everywhere(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    session.set_stage("softmax")
    softmax = window.stepper.current_view()
    session.set_stage("embedding")
    embedding = window.stepper.current_view()
    qtbot.waitUntil(embedding.is_current, timeout=10_000)    # E's norms: once, in a worker
    first = session.selected_token
    row_before = softmax.row.values.copy()
    vector_before = embedding.vector.values.copy()
    target = 1 if first != 1 else 2
    with qtbot.waitSignal(session.selectionChanged):
        window.stepper.tokens.strip.tokenClicked.emit(target)        # a click on the token strip
    assert session.selected_token == target != first
    assert window.stepper.tokens.strip.selected == target
    np.testing.assert_array_equal(embedding.vector.values, session.trace["token_embeddings"][target])
    assert not np.array_equal(embedding.vector.values, vector_before)
    session.set_stage("softmax")                              # hidden views catch up when shown
    np.testing.assert_array_equal(softmax.row.values, session.trace["attn_weights"][0, 0, target])
    assert not np.array_equal(softmax.row.values, row_before)


def test_clicking_a_heatmap_row_selects_that_token(qtbot, loaded_window):
    window = loaded_window("bert")
    session = window.session
    session.set_stage("scores")
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)       # (a view shown unbuilt draws in turns)
    heatmap = window.stepper.current_view().scores
    with qtbot.waitSignal(session.selectionChanged):
        heatmap.tokenClicked.emit(heatmap.token_at(1.0, 3.0))
    assert session.selected_token == 3
    assert heatmap.row_band.isVisible()


def test_hover_shows_exact_value_and_names(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    session.set_stage("scores")
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)       # (a view shown unbuilt draws in turns)
    heatmap = window.stepper.current_view().scores
    text = heatmap.hover_at(0.0, 2.0)                         # query 2, key 0
    exact = session.trace["scores"][0, 0, 2, 0]
    assert str(np.float32(exact)) in text
    labels = session.token_labels()
    assert f"query 2 '{labels[2]}'" in text and f"key 0 '{labels[0]}'" in text
    assert "masked" in heatmap.hover_at(2.0, 0.0)             # causal: query 0 cannot see key 2


def test_typing_produces_a_new_trace(qtbot, loaded_window):
    window = loaded_window("bert")
    session = window.session
    session.set_stage("softmax")
    old = session.trace
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        qtbot.keyClicks(window.stepper.text_box, " and the money")
    qtbot.waitUntil(lambda: session.trace.text == window.stepper.text_box.text(), timeout=10_000)
    assert session.trace is not old
    assert session.trace.n_seq > old.n_seq
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)       # (a view shown unbuilt draws in turns)
    view = window.stepper.current_view()
    assert view.weights.values.shape == (session.trace.n_seq, session.trace.n_seq)
    assert window.tokens_label.text().startswith(f"{session.trace.n_seq} tokens")


def test_empty_text_is_reported_inline_and_keeps_the_trace(qtbot, loaded_window):
    window = loaded_window("bert")
    old = window.session.trace
    with qtbot.waitSignal(window.session.computeFailed, timeout=10_000):
        window.stepper.text_box.clear()
        window.session.set_text("", immediate=True)
    assert window.session.trace is old
    assert window.stepper.text_problem.isVisibleTo(window) and "empty" in window.stepper.text_problem.text()


def test_broken_file_shows_the_error_and_keeps_model_text_and_stage(qtbot, loaded_window, tmp_path):
    window = loaded_window("bert")
    session = window.session
    session.set_stage("softmax")
    model, trace, text = session.model, session.trace, session.text
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with qtbot.waitSignal(session.openFailed, timeout=10_000):
        window.open_model(str(broken))
    assert window.errors and str(broken) in window.errors[-1]
    assert isinstance(window.error_box, QMessageBox) and window.error_box.isVisible()
    assert str(broken) in window.error_box.text()
    assert session.model is model and session.trace is trace
    assert session.text == text == window.stepper.text_box.text()
    assert session.stage_key == "softmax"
    window.error_box.close()


def test_temperature_slider_changes_weights_and_leaves_the_trace_alone(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    session.set_stage("softmax")
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)       # (a view shown unbuilt draws in turns)
    view = window.stepper.current_view()
    stored = session.trace["attn_weights"]
    copy = stored.copy()
    shown = view.weights.values                               # masked cells are NaN: hatched
    assert np.isnan(shown[session.trace.mask]).all()
    np.testing.assert_array_equal(np.nan_to_num(shown), stored[0, 0])
    with qtbot.waitSignal(session.temperatureChanged, timeout=5_000):
        view.slider.setValue(temperature_to_slider(3.0))      # rate-limited by a SignalProxy
    assert abs(session.temperature - 3.0) < 0.05
    shown = view.weights.values
    assert not np.allclose(np.nan_to_num(shown), stored[0, 0])
    np.testing.assert_allclose(np.nansum(shown, axis=1), 1.0, atol=1e-5)
    assert session.trace["attn_weights"] is stored and not stored.flags.writeable
    np.testing.assert_array_equal(stored, copy)
    view.reset.click()
    np.testing.assert_array_equal(np.nan_to_num(view.weights.values), stored[0, 0])


def test_weighted_sum_contributions_add_up_to_the_head_output(qtbot, loaded_window):
    window = loaded_window("bert")
    session = window.session
    session.set_stage("weighted_sum")
    session.select_token(2)
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)   # (a view first shown is drawn in turns)
    rows = window.stepper.current_view().contributions.values
    head_output = session.trace["head_outputs"][0, 0, 2]
    np.testing.assert_allclose(rows[:-1].sum(axis=0), head_output, atol=1e-5)
    np.testing.assert_array_equal(rows[-1], head_output)


def test_drop_a_model_file_on_the_window(qtbot, loaded_window, model_paths):
    window = loaded_window("bert")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(model_paths["gpt2"]))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(window.session.modelChanged, timeout=10_000):
        window.dropEvent(event)
    assert window.session.model.config.family == "gpt2"
    assert str(model_paths["gpt2"].resolve()) == window.recent.paths()[0]
