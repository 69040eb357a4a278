"""The translation window's Interventions page: a cross-attention head ablated shows no change
in the encoder's map and the first change in the decoder's Cross-attention row; both
translations are written; a click on a cell opens that stage and layer."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.ui.seq2seq.window import TranslationWindow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def window(qtbot):
    w = TranslationWindow("The bank of the river.")
    qtbot.addWidget(w)
    w.open_model(str(FIXTURES / "t5_tiny"))
    qtbot.waitUntil(lambda: w.trace is not None, timeout=10000)
    w.target_box.setText("Das Ufer")
    w.retrace()
    qtbot.waitUntil(lambda: w.trace.decoder.n_seq > 1, timeout=10000)
    w.show()
    yield w
    w.workers.wait()


def test_a_cross_head_ablation_in_both_maps_and_the_translation(qtbot, window):
    window.open_cell("", "interventions", None, None)
    panel = window.interventions_panel
    assert window.pages.currentWidget() is panel
    panel.attention.setCurrentIndex(panel.attention.findData("cross"))
    panel.layer.setValue(1)
    panel.head.setValue(2)
    panel.ablate.click()
    qtbot.waitUntil(lambda: panel.result is not None, timeout=20000)
    assert "cross-attention: ablate layer 1 head 2" in panel.chips.text()
    encoder, decoder = panel.maps["Encoder"].grid, panel.maps["Decoder"].grid
    assert np.nansum(encoder.values) == 0
    row = decoder.stages.index("cross_attention")
    assert decoder.values[row, 1] > 0 and np.nansum(decoder.values[:, 0]) == 0
    text = panel.translation.text()
    assert "clean" in text and "intervened" in text
    np.testing.assert_array_equal(panel.result[0].decoder.layer("cross_head_outputs", 1)[2], 0)
    panel.maps["Decoder"].heatmap.cellClicked.emit(row, 1)
    assert window.layer_box.value() == 1
    assert window.pages.currentWidget() is window.cross_view


def test_removing_the_source_positions_and_clear(qtbot, window):
    panel = window.interventions_panel
    window.open_cell("", "interventions", None, None)
    panel.no_positions.setChecked(True)
    qtbot.waitUntil(lambda: panel.result is not None, timeout=20000)
    encoder = panel.maps["Encoder"].grid
    assert encoder.values[encoder.stages.index("scores"), 0] > 0      # T5: the bias is gone
    panel.clear_all()
    assert panel.result is None and panel.interventions() == ()


def test_the_stages_can_show_the_intervened_pass(qtbot, window):
    panel = window.interventions_panel
    window.open_cell("", "interventions", None, None)
    panel.add_head("cross", 1, 2)
    qtbot.waitUntil(lambda: panel.result is not None, timeout=20000)
    clean = window.trace
    assert window.states["Decoder"].trace is clean.decoder
    panel.in_stages.setChecked(True)
    intervened = panel.result[0]
    assert window.states["Decoder"].trace is intervened.decoder
    assert window.states["Encoder"].trace is intervened.encoder
    assert "intervened pass" in window.status.text()
    window.open_cell("Decoder", "cross_attention", 1, 2)
    np.testing.assert_array_equal(window.cross_view.outputs.values, 0)    # the ablated head
    assert "the head is ablated (zero)" in window.cross_view.explanation.text()
    panel.in_stages.setChecked(False)
    assert window.states["Decoder"].trace is clean.decoder and "intervened" not in window.status.text()
    assert "ablated" not in window.cross_view.explanation.text()
    np.testing.assert_array_equal(window.cross_view.outputs.values,
                                  clean.decoder.layer("cross_head_outputs", 1)[2])
