"""Session files: save -> open in a new window gives the same trace numbers (generated tokens
included) and the same view; a model whose weights changed, or that is gone, is said in one
line naming the file, and the user may point to the model."""
import shutil

import numpy as np
import pytest
from PySide6.QtCore import QSettings

from transformer_stepper.core.model.interventions import AblateHead
from transformer_stepper.io.session_file import read_session
from transformer_stepper.ui.main_window import MainWindow
from transformer_stepper.ui.session import Session
from transformer_stepper.ui.menus.session_file import SessionOpener, save_session

from .conftest import builtin_model_or_skip


def _new_window(qtbot, tmp_path, name):
    session = Session(debounce_ms=5)
    window = MainWindow(session, QSettings(str(tmp_path / f"{name}.ini"), QSettings.Format.IniFormat))
    session.setParent(window)
    qtbot.addWidget(window)
    window.show()
    return window


def _close(window):
    window.close()
    assert window.session.workers.wait(10_000)


def _open(qtbot, window, path, choose=None):
    messages = []
    opener = SessionOpener(window, str(path), choose or (lambda problem: None))
    opener.finished.connect(messages.append)
    opener.start()
    qtbot.waitUntil(lambda: bool(messages), timeout=20_000)
    return messages[0]


def test_save_then_open_reproduces_the_trace_and_the_view(qtbot, tmp_path):
    builtin = str(builtin_model_or_skip())
    first = _new_window(qtbot, tmp_path, "first")
    s = first.session
    with qtbot.waitSignal(s.traceChanged, timeout=20_000):
        first.open_model(builtin)
    with qtbot.waitSignal(s.traceChanged, timeout=10_000):
        s.set_text("the king rode to the bank and he", immediate=True)
    with qtbot.waitSignal(s.traceChanged, timeout=10_000):
        s.generation.generate(1)
    qtbot.waitUntil(lambda: not s.generation.running, timeout=10_000)
    assert s.trace.generated.sum() >= 1
    s.set_layer(2); s.set_head(3); s.set_stage("scores"); s.select_token(4); s.set_temperature(0.5)
    view = first.tabs.show_tab("interventions")
    view.set_head_ablated(1, 2)
    view.run()
    first.tabs.view("compare").set_sentences(["He sat on the bank .", "She kept gold in the bank ."], "bank")
    first.tabs.show_tab("compare")
    path = tmp_path / "view.stepper"
    save_session(first, str(path))
    saved = read_session(path)
    assert saved.generated_ids and saved.interventions == (AblateHead(1, 2),)
    expected_ids, expected_hidden = s.trace.input_ids.copy(), s.trace.hidden_states.copy()
    expected_weights = s.trace.layer("attn_weights", 2).copy()
    _close(first)

    second = _new_window(qtbot, tmp_path, "second")
    assert _open(qtbot, second, path) == ""
    t = second.session
    np.testing.assert_array_equal(t.trace.input_ids, expected_ids)
    np.testing.assert_array_equal(t.trace.generated[-len(saved.generated_ids):], True)
    np.testing.assert_allclose(t.trace.hidden_states, expected_hidden, rtol=0, atol=1e-5)
    np.testing.assert_allclose(t.trace.layer("attn_weights", 2), expected_weights, rtol=0, atol=1e-6)
    assert (t.stage_key, t.layer, t.head, t.temperature) == ("scores", 2, 3, 0.5)
    qtbot.waitUntil(lambda: t.selected_token == 4, timeout=5_000)
    assert second.tabs.current_key() == "compare"
    compare = second.tabs.view("compare")
    assert compare.word_box.text() == "bank" and compare.state.texts()[:2] == ["He sat on the bank .",
                                                                                 "She kept gold in the bank ."]
    qtbot.waitUntil(lambda: t.interventions == (AblateHead(1, 2),), timeout=5_000)
    _close(second)


def test_changed_or_missing_weights_are_named_and_the_user_may_point_to_the_model(qtbot, tmp_path, model_paths):
    folder = tmp_path / "model.npz"
    shutil.copy(model_paths["gpt2"], folder)
    window = _new_window(qtbot, tmp_path, "w")
    with qtbot.waitSignal(window.session.traceChanged, timeout=20_000):
        window.open_model(str(folder))
    path = tmp_path / "s.stepper"
    save_session(window, str(path))
    weights = folder
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF                                      # one byte of the weights changed
    weights.write_bytes(bytes(data))
    message = _open(qtbot, window, path)
    assert str(path) in message and "fingerprint differs" in message and "\n" not in message
    shutil.move(folder, tmp_path / "moved.npz")
    asked = []
    message = _open(qtbot, window, path, lambda problem: asked.append(problem) or str(model_paths["gpt2"]))
    assert message == "" and "is not there" in asked[0]
    assert window.session.model_path == str(model_paths["gpt2"])
    _close(window)


@pytest.mark.parametrize("edit, field", [
    (lambda b: b.replace('"layer": 0', '"layer": -3'), "view.layer"),
    (lambda b: b.replace('"stage": "tokenize"', '"stage": "nope"'), "view.stage"),
    (lambda b: b.replace('"format": "transformer-stepper session"', '"format": "x"'), "format"),
    (lambda b: b.replace('"generated_ids": []', '"generated_ids": ["a"]'), "generated_ids[0]"),
    (lambda b: b[:40], "not JSON"),
])
def test_a_bad_session_file_is_one_line_naming_the_field(tmp_path, edit, field):
    from transformer_stepper.io.session_file import SessionData, to_json
    from transformer_stepper.core.model.errors import ModelError

    body = to_json(SessionData(None, "m", "builtin", "a text"))
    path = tmp_path / "bad.stepper"
    path.write_text(edit(body), encoding="utf-8")
    with pytest.raises(ModelError) as info:
        read_session(path)
    assert str(path) in str(info.value) and field in str(info.value) and "\n" not in str(info.value)
