"""Words that said less than the numbers: provenance headers 'a b / a·b' over a softmax's terms,
which are no products; 'cosine ... after layer 3, ... after the last layer' when layer 3 is
the last one."""
from __future__ import annotations

from pathlib import Path

from transformer_stepper import load_model
from transformer_stepper.core.analysis.provenance.explain import explain
from transformer_stepper.ui.interventions.provenance_panel import explanation_html, term_headers

GPT2 = Path(__file__).resolve().parents[1] / "fixtures" / "gpt2_tiny_lm"


def test_provenance_heads_say_what_the_columns_are():
    model = load_model(str(GPT2))
    trace = model.trace("the bank of the river")
    weights = explain(model, trace, "attn_weights", (0, 0, 3, 1))
    assert all(len(t.factors) == 1 for t in weights.terms)
    assert term_headers(weights) == ("x", "", "term") and "a·b" not in explanation_html(weights)
    scores = explain(model, trace, "scores", (0, 0, 3, 1))
    assert any(len(t.factors) == 2 for t in scores.terms)
    assert term_headers(scores) == ("a", "b", "a·b") and "a·b" in explanation_html(scores)


def test_the_last_layer_is_said_once(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    last = session.model.config.n_layer - 1
    session.set_stage("layer_output")
    session.set_layer(last)
    qtbot.waitUntil(lambda: f"after layer {last}, the last layer" in window.stepper.explanation.toPlainText(),
                    timeout=10_000)
    assert "after the last layer" not in window.stepper.explanation.toPlainText()
    session.set_layer(0)
    qtbot.waitUntil(lambda: "after the last layer" in window.stepper.explanation.toPlainText(), timeout=10_000)
