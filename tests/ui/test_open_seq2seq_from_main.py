"""The main window opens an encoder–decoder in a TranslationWindow (File → Open, a drop, the
recent list): the main window keeps its model, text and stage, and shows no error."""
from pathlib import Path

import pytest

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from transformer_stepper.ui.seq2seq.window import TranslationWindow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _opened(qtbot, window) -> TranslationWindow:
    assert len(window.translations.windows) == 1
    translation = window.translations.windows[0]
    qtbot.waitUntil(lambda: translation.trace is not None, timeout=10_000)
    return translation


def test_open_keeps_the_main_window_and_opens_a_translation_window(qtbot, loaded_window):
    window = loaded_window("gpt2")
    window.session.step(+1)
    model, text, stage = window.session.model, window.session.text, window.session.stage_key
    window.open_model(str(FIXTURES / "bart_tiny"))
    translation = _opened(qtbot, window)
    assert translation.isVisible() and translation.model.config.family == "bart"
    assert translation.trace.cross_attentions.shape[0] == translation.model.config.decoder.n_layer
    assert window.session.model is model and window.session.text == text and window.session.stage_key == stage
    assert window.errors == []
    assert window.recent.paths()[0] == str((FIXTURES / "bart_tiny").resolve())
    translation.workers.wait()


def test_a_dropped_encoder_decoder_opens_in_its_window_and_closes_with_the_main_one(qtbot, window):
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(FIXTURES / "bart_tiny" / "config.json"))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, data, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    translation = _opened(qtbot, window)
    assert window.session.model is None and window.errors == []
    window.close()
    assert not translation.isVisible()


def test_a_one_stack_model_still_opens_in_the_main_window(qtbot, window, model_paths):
    with qtbot.waitSignal(window.session.traceChanged, timeout=10_000):
        window.open_model(str(model_paths["gpt2"]))
    assert window.translations.windows == []


def test_file_builtin_translator_opens_the_shipped_translator(qtbot, window):
    action = next(a for a in window.file_menu.actions() if "Translator" in a.text())
    action.trigger()
    translation = _opened(qtbot, window)
    config = translation.model.config
    assert config.family == "marian" and config.encoder.n_layer == 2
    assert translation.source_box.text().endswith("near the river .")      # its example sentence
    translation.translate()
    qtbot.waitUntil(lambda: int(translation.trace.decoder.input_ids[-1]) == config.eos_token_id,
                    timeout=10_000)
    # English "bank" beside a river becomes Velan "bordo"; the verb comes last
    assert translation.target_box.text() == "la viro olda la bordo ruga la rivo apud vidis ."
    assert window.session.model is None and window.errors == []
    translation.workers.wait()


@pytest.mark.qt_log_ignore("does not support raise", "does not support propagateSizeHints")   # offscreen
def test_compare_with_an_encoder_decoder_goes_to_the_open_translation_window(qtbot, loaded_window):
    window = loaded_window("gpt2")
    window.open_model(str(FIXTURES / "bart_tiny"))
    translation = _opened(qtbot, window)
    window.compare_with(str(FIXTURES / "bart_tiny"))        # File → Compare With Model…
    qtbot.waitUntil(lambda: translation.two.result is not None, timeout=15_000)
    assert translation.pages.currentWidget() is translation.two_page
    assert window.tabs.views.get("model_diff") is None or window.tabs.views["model_diff"].state.model_b is None
    translation.two.close_other()
    translation.workers.wait()
