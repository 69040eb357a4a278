"""The positions laboratory's concat variant in the stepper: stages 3 and 4 are open for it and
show its own concatenation: p, the sinusoids of width d_position, and x₀ = [e | p] as the trace
recorded it, e's block and p's side by side."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt

from transformer_stepper.core.model import stages
from transformer_stepper.io.resources import resources_dir

CONCAT = resources_dir() / "positions" / "concat"
TIMEOUT = 15_000


def test_stages_3_and_4_show_e_beside_p(qtbot, window):
    session = window.session
    session.set_text("the king sat by the river", immediate=True)
    with qtbot.waitSignal(session.traceChanged, timeout=TIMEOUT):
        window.open_model(str(CONCAT))
    config, trace = session.model.config, session.trace
    assert config.position == "concat" and 0 < config.d_position < config.d_model
    for key in ("position_encoding", "position_addition"):
        row = [s.key for s in stages.STAGES].index(key)
        assert window.stepper.stage_list.item(row).flags() & Qt.ItemFlag.ItemIsEnabled, key
    n, d_token = trace.n_seq, config.d_model - config.d_position
    # stage 3: p is the sinusoid table of width d_position (the formula, not the app's copy)
    session.set_stage("position_encoding")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    qtbot.waitUntil(window.stepper.settled, timeout=TIMEOUT)     # drawn, explained
    positions = np.arange(n)[:, None]
    expected = np.empty((n, config.d_position))
    angles = positions / 10000.0 ** (np.arange(0, config.d_position, 2) / config.d_position)
    expected[:, 0::2], expected[:, 1::2] = np.sin(angles), np.cos(angles)
    np.testing.assert_allclose(view.table.values, expected, atol=1e-6)
    assert f"{config.d_position} wide" in view.table.title
    text = window.stepper.explanation.toPlainText()
    assert "beside" in text and f"[{n} × {config.d_position}]" in text
    # stage 4: e, p, and x₀ = [e | p] as recorded by the forward pass
    session.set_stage("position_addition")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    qtbot.waitUntil(window.stepper.settled, timeout=TIMEOUT)     # drawn, explained
    shown = [name for name, figure in view.figures() if not figure.isHidden()]
    assert shown == ["token_embeddings", "position_embeddings", "concatenation_alternative"]
    x0 = view.concat.values
    assert x0.shape == (n, config.d_model)
    np.testing.assert_array_equal(x0[:, :d_token], trace["token_embeddings"])
    np.testing.assert_allclose(x0[:, d_token:], expected, atol=1e-6)
    np.testing.assert_array_equal(x0, trace.hidden_states[0])        # what enters layer 0
    assert view.boundary.isVisible() and view.boundary.value() == d_token - 0.5
    assert "[e | p]" in view.concat.title
    text = window.stepper.explanation.toPlainText()
    assert "concatenates" in text and f"[{n} × {d_token}] ‖ [{n} × {config.d_position}]" in text
    assert window.errors == []
