"""A stage whose layer is still being computed in a worker: the explanation says what it waits
for and reads none of the layer's numbers (reading them made the GUI thread wait for the worker:
the longest stall of a walk on a GPT-2-small-shaped model at 1,000 tokens); once the layer is
drawn it quotes them."""
from transformer_stepper.core.trace.trace import Trace
from transformer_stepper.ui.stepper.stepper_view import EXPLAIN


def test_explanation_waits_for_the_layer_then_quotes_it(qtbot, loaded_window, monkeypatch):
    window = loaded_window("gpt2")
    session, stepper = window.session, window.stepper
    session.set_stage("qkv")
    qtbot.waitUntil(stepper.settled, timeout=10_000)
    held = []                                          # the worker "still computing" layer 1
    real_ready, real_prepare = session.layer_ready, session.prepare_layer
    monkeypatch.setattr(session, "layer_ready", lambda layer=None, trace=None:
                        layer != 1 and real_ready(layer, trace))
    monkeypatch.setattr(session, "prepare_layer", lambda layer, trace=None: held.append((layer, trace)))
    asked = []
    real_layer = Trace.layer
    monkeypatch.setattr(Trace, "layer", lambda self, name, layer: asked.append(layer) or real_layer(self, name, layer))
    session.set_layer(1)
    qtbot.waitUntil(lambda: not session.frames.pending(EXPLAIN), timeout=5_000)
    stepper.update_explanation()
    assert held and "Computing layer 1" in stepper.explanation.toPlainText()
    assert 1 not in asked
    monkeypatch.setattr(session, "layer_ready", real_ready)
    monkeypatch.setattr(session, "prepare_layer", real_prepare)
    monkeypatch.setattr(Trace, "layer", real_layer)
    stepper.current_view().ensure_current()            # (the layer is ready: the view draws it)
    qtbot.waitUntil(lambda: stepper.current_view().is_current() and stepper.settled(), timeout=10_000)
    assert "layer 1" in stepper.explanation.toPlainText() and "Computing" not in stepper.explanation.toPlainText()
