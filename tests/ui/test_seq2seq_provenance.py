"""Alt-click in the translation window: a cross-attention weight (the alignment), a decoder
hidden value and an encoder score are explained in the provenance panel, recomputed equal to
the traced value, with Copy as Python; a new trace re-explains the same address."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.ui.seq2seq import cross_view as cross_view_module
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


def test_alt_click_on_the_alignment_explains_the_cross_attention_weight(qtbot, window, monkeypatch):
    monkeypatch.setattr(cross_view_module, "_explaining", lambda: True)
    window.cross_view.alignment.cellClicked.emit(1, 2)
    panel = window.provenance_panel
    e = panel.explanation
    assert e is not None and e.name == "cross_attn_weights" and e.index == (0, 0, 1, 2)
    assert e.matches() and "✓" in panel.check.text()
    assert e.traced == pytest.approx(float(window.trace.cross_attentions[0, 0, 1, 2]))
    assert "trace.layer('cross_scores', 0)" in panel.python.toPlainText() and panel.copy_python.isEnabled()
    scope = {"model": window.provenance.model, "trace": window.provenance.shown_trace}
    exec(panel.python.toPlainText(), scope)
    assert np.isclose(scope["value"], e.traced, atol=1e-6)
    assert window.provenance_dock.isVisible()


def test_a_decoder_hidden_value_and_an_encoder_score(qtbot, window):
    panel = window.provenance_panel
    window.states["Decoder"].request_provenance("hidden_states", (2, 1, 3))
    e = panel.explanation
    assert e.matches() and e.traced == pytest.approx(float(window.trace.decoder_hidden_states[2, 1, 3]))
    window.states["Encoder"].request_provenance("scores", (1, 2, 3, 1))
    e = panel.explanation
    assert e.matches() and any("position bias" in s.label for s in e.steps)
    scope = {"model": window.provenance.model, "trace": window.provenance.shown_trace}
    exec(panel.python.toPlainText(), scope)
    assert np.isclose(scope["value"], e.traced, atol=1e-5)
    window.source_box.setText("The bank of the old river.")     # a new trace: the same address
    window.retrace()
    qtbot.waitUntil(lambda: window.trace.encoder.text == "The bank of the old river.", timeout=10000)
    assert panel.explanation is not None and panel.explanation.index == (1, 2, 3, 1)
    assert panel.explanation.traced == pytest.approx(float(window.trace.encoder.layer("scores", 1)[2, 3, 1]))
