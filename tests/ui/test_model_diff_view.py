"""The Two Models tab: File → Compare With Model opens a second model in a worker; the drift map
shows core/analysis/model_diff.py's figures for the two traces of the Stepper's text; typing re-runs
both; the toolbar's layer and head choose the attention pair; a model of another shape is a
one-line message; Help → Check Against Transformers runs off the GUI thread and says when it
cannot run (no torch on the worker's path)."""
import numpy as np

from tests.builders import random_params, tiny_config, tokenizer_for, write_npz_model
from transformer_stepper import load_model
from transformer_stepper.core.analysis import model_diff


def other_gpt2(tmp_path, seed=7, **changes):
    config = tiny_config("gpt2", **changes).replace(name="tiny-gpt2-other")
    return write_npz_model(tmp_path / f"other{seed}.npz", config, random_params(config, seed=seed),
                           tokenizer_for("gpt2"))


def test_compare_with_a_model_and_type(qtbot, loaded_window, tmp_path):
    window = loaded_window("gpt2")
    session = window.session
    path_b = other_gpt2(tmp_path)
    window.compare_with(str(path_b))
    view = window.tabs.views["model_diff"]
    assert window.tabs.current_key() == "model_diff"
    qtbot.waitUntil(lambda: view.state.result is not None, timeout=10_000)
    result = view.state.result
    assert result.trace_a is session.trace                       # the Stepper's own trace of A
    expected = model_diff.diff_traces(session.trace, load_model(path_b).trace(session.text))
    np.testing.assert_array_equal(view.drift_map.values, expected.stage_map(view.drift_map.stages).astype(np.float32))
    assert "Most drift enters at layer" in view.readout.text() and "KL(p_B ‖ p_A)" in view.readout.text()
    assert view.token_drift.curves[0].y.shape == (session.model.config.n_layer + 1,)
    # typing: the session traces A, and B follows on the same text
    session.set_text("the river bank of the money", immediate=True)
    qtbot.waitUntil(lambda: view.state.result is not None and view.state.result.trace_b.text == session.text
                    and view.state.result.trace_a is session.trace, timeout=10_000)
    # the toolbar's layer and head: that head's attention in both models
    session.set_layer(1)
    session.set_head(2)
    qtbot.waitUntil(lambda: view.state.pair is not None and view.state.pair[:2] == (1, 2), timeout=10_000)
    np.testing.assert_array_equal(view.attention.a.values, session.trace.layer("attn_weights", 1)[2])
    assert "Jensen–Shannon" in view.attention.caption.text()


def test_a_model_of_another_shape_is_one_line(qtbot, loaded_window, tmp_path):
    window = loaded_window("gpt2")
    window.compare_with(str(other_gpt2(tmp_path, d_ff=96)))
    view = window.tabs.views["model_diff"]
    qtbot.waitUntil(lambda: "architectures differ" in view.readout.text(), timeout=10_000)
    assert view.state.result is None and "\n" not in view.readout.text()


def test_check_against_transformers_without_torch(qtbot, loaded_window, tmp_path, monkeypatch):
    blocker = tmp_path / "blocked"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError(\"No module named 'torch'\")\n")
    monkeypatch.setenv("PYTHONPATH", str(blocker))       # the worker process cannot import torch
    window = loaded_window("gpt2")
    from transformer_stepper.ui.model_diff.check_dialog import show_check

    dialog = show_check(window)
    qtbot.addWidget(dialog)
    assert dialog.job is not None                         # running in a worker, the GUI is free
    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=60_000)
    assert dialog.outcome.result is None
    assert "needs torch and transformers" in dialog.report.toPlainText()
    dialog.close()
