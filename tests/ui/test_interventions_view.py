"""The Interventions tab runs the intervened pass in a worker, shows the probability changes
it makes at the selected token (the same as tracing with the intervention), leaves the clean
trace alone, names the active interventions and clears them."""
import numpy as np
import pytest

from transformer_stepper import AblateHead, HeadTemperature, NoPositions
from transformer_stepper.core.model import ops
from transformer_stepper.core.analysis.differences import stage_differences, stage_grid
from transformer_stepper.ui.interventions.difference_map import percent


def test_ablating_a_head_shows_what_the_prediction_gains_and_loses(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    clean = session.trace
    view = window.tabs.show_tab("interventions")
    with qtbot.waitSignal(view.resultReady, timeout=10_000):
        view.set_head_ablated(1, 2)
        view.no_positions.setChecked(True)
    assert view.interventions() == (AblateHead(1, 2), NoPositions())
    assert "ablate layer 1 head 2" in view.chips.text() and "no positions" in view.chips.text()
    assert session.trace is clean and clean.interventions == ()        # the clean trace is untouched
    i = session.selected_token
    expected = session.model.trace(session.text, interventions=[AblateHead(1, 2), NoPositions()])
    delta = ops.softmax(expected.logits[i].copy()) - ops.softmax(clean.logits[i].copy())
    np.testing.assert_allclose(view.changes.values, delta[view.delta_ids], atol=1e-6)
    assert view.changes.values[0] == pytest.approx(delta.max(), abs=1e-6)
    assert view.moved_values[-1] > 0
    view.clear_all()
    assert view.interventions() == () and view.chips.text() == "No intervention."
    qtbot.waitUntil(lambda: view.intervened is None, timeout=10_000)


def test_a_head_temperature_is_an_intervention_like_the_others(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    view = window.tabs.show_tab("interventions")
    assert view.temper_layer.maximum() == session.model.config.n_layer - 1
    assert view.temper_head.maximum() == session.model.config.n_head - 1
    with qtbot.waitSignal(view.resultReady, timeout=10_000):
        view.temper_layer.setValue(1)
        view.temper_head.setValue(3)
        view.temper_value.setValue(0.25)
        view.temper.setChecked(True)
    assert view.interventions() == (HeadTemperature(1, 3, 0.25),)
    i = session.selected_token
    expected = session.model.trace(session.text, interventions=[HeadTemperature(1, 3, 0.25)])
    delta = ops.softmax(expected.logits[i].copy()) - ops.softmax(session.trace.logits[i].copy())
    np.testing.assert_allclose(view.changes.values, delta[view.delta_ids], atol=1e-6)
    view.clear_all()
    assert not view.temper.isChecked() and view.interventions() == ()


def ablate(qtbot, window, layer: int, head: int):
    view = window.tabs.show_tab("interventions")
    with qtbot.waitSignal(view.resultReady, timeout=10_000):
        view.set_head_ablated(layer, head)
    return view


def test_the_difference_map_shows_the_core_numbers_at_every_stage(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    view = ablate(qtbot, window, 1, 2)
    expected_trace = session.model.trace(session.text, interventions=[AblateHead(1, 2)])
    differences = stage_differences(session.trace, expected_trace)
    expected = stage_grid(differences, session.model.config)
    heatmap = view.stage_map.heatmap
    assert view.stage_map.grid.stages == expected.stages and view.stage_map.isVisible()
    np.testing.assert_allclose(heatmap.values, expected.values, rtol=1e-6)     # NaN where equal NaN
    assert not np.nan_to_num(heatmap.values[:, 0]).any()          # layer 0 runs before the ablation
    row = expected.stages.index("weighted_sum")
    assert heatmap.values[row, 1] > 0
    labels = [text.toPlainText() for text in heatmap._cell_texts if text.isVisible()]
    n_layer = session.model.config.n_layer
    assert labels[row * n_layer + 1] == percent(expected.values[row, 1]) != "0"
    assert "head_outputs" in heatmap.hover_at(1, row) and "the head that changed most: 2" in heatmap.hover_at(1, row)
    # at the selected token: the same function at that position
    view.stage_map.scope.setCurrentIndex(1)
    at = stage_grid(differences, session.model.config, position=session.selected_token)
    np.testing.assert_allclose(heatmap.values, at.values, rtol=1e-6)
    session.select_token(0)
    np.testing.assert_allclose(heatmap.values, stage_grid(differences, session.model.config, 0).values, rtol=1e-6)


def test_a_click_on_a_cell_opens_that_stage_layer_and_head_in_the_stepper(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    view = ablate(qtbot, window, 1, 2)
    assert session.head == 0 and session.layer == 0
    grid = view.stage_map.grid
    view.stage_map.heatmap.click_at(1.1, grid.stages.index("weighted_sum") - 0.2)   # data coordinates
    assert window.tabs.current_key() == "stepper"
    assert (session.stage_key, session.layer, session.head) == ("weighted_sum", 1, 2)
    window.tabs.show_tab("interventions")
    view.stage_map.heatmap.click_at(0, grid.stages.index("embedding"))      # a stage that runs once
    assert window.tabs.current_key() == "stepper" and session.stage_key == "embedding" and session.layer == 1


def test_show_intervened_draws_the_intervened_pass_until_turned_off_or_cleared(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    action, banner = window.show_intervened_action, window.stepper.intervention_banner
    assert not action.isEnabled() and not action.isChecked() and banner.isHidden()
    view = ablate(qtbot, window, 1, 2)
    assert action.isEnabled() and not action.isChecked() and "clean model" in banner.label.text()
    window.tabs.show_tab("stepper")
    session.set_layer(1)
    session.set_head(2)
    session.set_stage("weighted_sum")
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)   # (a view first shown is drawn in turns)
    stage = window.stepper.current_view()
    i = session.selected_token
    clean_row = session.trace.layer("head_outputs", 1)[2, i]
    assert np.abs(clean_row).max() > 0
    np.testing.assert_array_equal(stage.head_outputs.values[2], clean_row)
    action.trigger()                                            # on
    assert session.show_intervened and stage.trace is session.intervened_trace
    np.testing.assert_array_equal(stage.head_outputs.values[2], 0)        # the ablated head
    assert "INTERVENED:" in banner.label.text() and "ablate layer 1 head 2" in banner.label.text()
    assert "intervened" in window.stage_title.text() and banner.button.text() == "Show the clean model"
    assert "head 2 is ablated" in stage.intervention_note.text() and stage.intervention_note.isVisible()
    session.set_head(1)
    assert "head 2 of this layer is ablated" in stage.intervention_note.text()
    session.set_head(2)
    session.request_provenance("head_outputs", (1, 2, i, 0))   # Alt-click: the value shown
    panel = window.provenance_panel
    assert panel.explanation.traced == 0 and "intervened:" in panel.body.toHtml()
    banner.button.click()                                       # off: the clean trace, not recomputed
    assert stage.trace is session.trace and not action.isChecked() and stage.intervention_note.isHidden()
    np.testing.assert_array_equal(stage.head_outputs.values[2], clean_row)
    # a new text while on: the views wait for its intervened pass rather than show the clean one
    action.trigger()
    seen = []                    # as the new clean trace arrives (its pass may finish at once)
    session.traceChanged.connect(lambda: seen.append((session.waiting_for_intervened, stage.placeholder.text())))
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text("the river of the bank", immediate=True)
    assert seen[0] == (True, "Running the intervened forward pass…")
    qtbot.waitUntil(lambda: session.showing_intervened, timeout=10_000)
    assert session.intervened_trace.text == "the river of the bank"
    np.testing.assert_array_equal(stage.head_outputs.values[2], 0)
    assert stage.placeholder.isHidden()
    # clearing the interventions turns it off
    interventions = window.tabs.view("interventions")
    with qtbot.waitSignal(session.interventionsChanged, timeout=10_000):
        interventions.clear_all()
    assert not session.show_intervened and not action.isChecked() and not action.isEnabled()
    assert banner.isHidden() and stage.trace is session.trace
    np.testing.assert_array_equal(stage.head_outputs.values[2], session.trace.layer("head_outputs", 1)[2, session.selected_token])
