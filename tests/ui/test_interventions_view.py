"""The Interventions tab runs the intervened pass in a worker, shows the probability changes
it makes at the selected token (the same as tracing with the intervention), leaves the clean
trace alone, names the active interventions and clears them."""
import numpy as np
import pytest

from transformer_stepper import AblateHead, HeadTemperature, NoPositions
from transformer_stepper.core import ops


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
