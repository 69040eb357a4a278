"""Hostile conditions in the window (issue 25): the open model's weights file truncated under it,
a FIFO, a shard index leaving its folder. The window says so in one line and keeps the text,
the model and the last good trace; no exception escapes, nothing waits forever."""
import json
import os

import numpy as np
import pytest

from tests.builders import gpt2_folder
from transformer_stepper.core.model import stages

from .test_stepping import walk


def _open(qtbot, window, path, text):
    window.session.set_text(text, immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=10_000):
        window.open_model(str(path))


def _visit_every_stage(qtbot, window):
    for key, layer in walk(window.session):
        view = window.stepper.current_view()
        qtbot.waitUntil(lambda: view.is_current() or window.errors or window.stepper.text_problem.isVisible(),
                        timeout=10_000)


def test_weights_truncated_while_open_keep_text_and_trace(qtbot, window, tmp_path):
    folder = gpt2_folder(tmp_path / "gpt2", n_layer=2)
    _open(qtbot, window, folder, "the bank of the river")
    session = window.session
    good = session.trace
    good_hidden = np.array(good["hidden_states"])
    path = folder / "model.safetensors"
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    with qtbot.waitSignal(session.computeFailed, timeout=10_000) as failed:
        session.set_text("the bank of the river was wide", immediate=True)
    assert failed.args == [f"{path}: the file changed on disk; reopen it"]
    assert session.text == "the bank of the river was wide"
    assert window.stepper.text_box.text() == "the bank of the river was wide"
    assert session.trace is good and session.model is not None
    assert np.array_equal(session.trace["hidden_states"], good_hidden)
    assert window.stepper.text_problem.isVisible() and "reopen it" in window.stepper.text_problem.text()
    # every stage, every layer: views that read weights say so, none throws or blanks the window
    _visit_every_stage(qtbot, window)
    assert session.trace is good
    session.set_stage(stages.STAGES[0].key)


def test_fifo_and_traversal_fail_to_open_and_keep_the_model(qtbot, window, tmp_path, model_paths):
    _open(qtbot, window, model_paths["gpt2"], "the bank of the river")
    session = window.session
    before = session.trace
    fifo = tmp_path / "weights.npz"
    os.mkfifo(fifo)
    with qtbot.waitSignal(session.openFailed, timeout=10_000) as failed:
        window.open_model(str(fifo))
    assert failed.args[0].startswith(f"{fifo}: not a regular file (a FIFO)")
    folder = gpt2_folder(tmp_path / "sharded", shards=2)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"] = {name: "../../../../etc/passwd" for name in index["weight_map"]}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with qtbot.waitSignal(session.openFailed, timeout=10_000) as failed:
        window.open_model(str(folder))
    assert "outside the model folder" in failed.args[0]
    assert session.trace is before and session.text == "the bank of the river"


def _nan_model(path, everywhere=False):
    from tests.builders import bytelevel_tokenizer, random_params, tiny_config, write_npz_model
    config = tiny_config("gpt2")
    params = {name: value.copy() for name, value in random_params(config, seed=1).items()}
    if everywhere:
        params["wte"][:] = np.nan
    else:
        params["h.0.mlp.fc.w"][:, :5] = np.nan
        params["h.1.attn.q.w"][0, 0] = np.inf
    return write_npz_model(path, config, params, bytelevel_tokenizer())


@pytest.mark.parametrize("everywhere", [False, True])
def test_non_finite_weights_draw_without_throwing(qtbot, window, tmp_path, everywhere):
    # one policy: warn once, draw what is finite, mark NaN/Inf cells, never throw
    _open(qtbot, window, _nan_model(tmp_path / "nan.npz", everywhere), "the bank of the river")
    session = window.session
    assert not np.isfinite(session.trace["hidden_states"]).all()
    assert window.stepper.text_problem.isVisible() and "NaN" in window.stepper.text_problem.text()
    _visit_every_stage(qtbot, window)
    for i in range(session.trace.n_seq):     # every token's hover and prediction
        session.select_token(i)
    assert window.errors == []


def test_non_finite_weights_generate_and_compare_say_so(qtbot, window, tmp_path):
    from transformer_stepper.core.trace.generate import Sampling
    _open(qtbot, window, _nan_model(tmp_path / "nan.npz"), "the bank of the river")
    generation = window.session.generation
    for sampling in (Sampling(), Sampling(temperature=1.0, seed=3)):
        generation.set_sampling(sampling)
        with qtbot.waitSignal(generation.failed, timeout=10_000) as failed:
            assert generation.generate(3)
        assert "every next-token logit is NaN or infinite" in failed.args[0]
    assert window.session.trace.text == "the bank of the river"    # nothing made up, nothing lost
    assert window.errors == []
