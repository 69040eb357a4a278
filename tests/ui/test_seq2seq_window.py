"""The encoder–decoder window: Encoder and Decoder sections with Cross-attention, the alignment
drawn from the trace's cross-attention weights, teacher forcing, a step, linked selection."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.ui.seq2seq.window import TranslationWindow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def window(qtbot):
    w = TranslationWindow("The bank of the river.")
    qtbot.addWidget(w)
    w.open_model(str(FIXTURES / "bart_tiny"))
    qtbot.waitUntil(lambda: w.trace is not None, timeout=10000)
    yield w
    w.workers.wait()


def _items(w):
    return {w.stage_list.topLevelItem(i).text(0): [w.stage_list.topLevelItem(i).child(j).text(0)
            for j in range(w.stage_list.topLevelItem(i).childCount())]
            for i in range(w.stage_list.topLevelItemCount())}


def test_sections_and_the_cross_attention_stage(window):
    items = _items(window)
    assert list(items) == ["Encoder", "Decoder", "Interventions", "Compare (encoder)", "Two models"]
    assert "9. Cross-attention" not in items["Encoder"] and "12. Prediction" not in items["Encoder"]
    decoder = items["Decoder"]
    assert decoder.index("9. Cross-attention") == decoder.index("9. Output projection and residual") + 1
    assert decoder.index("10. Feed-forward and residual") == decoder.index("9. Cross-attention") + 1
    assert window.pages.currentWidget() is window.cross_view    # opens on cross-attention


def test_teacher_forcing_then_a_step_and_the_alignment(qtbot, window):
    window.target_box.setText("Das Ufer")
    window.retrace()
    qtbot.waitUntil(lambda: window.trace.decoder.n_seq > 1, timeout=10000)
    n_tgt, n_src = window.trace.decoder.n_seq, window.trace.encoder.n_seq
    window.head_box.setValue(2)
    np.testing.assert_array_equal(window.cross_view.alignment.values, window.trace.cross_attentions[0, 2])
    assert window.cross_view.alignment.values.shape == (n_tgt, n_src)
    window.next_token()
    qtbot.waitUntil(lambda: window.trace.decoder.n_seq == n_tgt + 1, timeout=10000)
    assert window.trace.decoder.computed_rows == 1                 # the step computed one position
    assert window.target_box.text().startswith("Das")


def test_a_click_on_the_alignment_selects_target_and_source(window):
    window.cross_view.alignment.cellClicked.emit(0, 3)
    assert window.states["Encoder"].selected_token == 3
    assert window.states["Decoder"].selected_token == 0
    assert window.cross_view.alignment.col_band.isVisible()


def test_a_click_on_a_prediction_bar_appends_that_token(qtbot, window):
    n = window.trace.decoder.n_seq
    window.states["Decoder"].generation.append(7)
    qtbot.waitUntil(lambda: window.trace.decoder.n_seq == n + 1, timeout=10000)
    assert int(window.trace.decoder.input_ids[-1]) == 7


def _show(window, section, key):
    for i in range(window.stage_list.topLevelItemCount()):
        top = window.stage_list.topLevelItem(i)
        for j in range(top.childCount()):
            if top.child(j).data(0, 0x0100) == (section, key):
                window.stage_list.setCurrentItem(top.child(j))
                return window.pages.currentWidget()
    raise AssertionError(f"no stage {section} {key}")


def test_t5_scores_are_titled_as_computed(qtbot):
    w = TranslationWindow("The bank of the river.")
    qtbot.addWidget(w)
    w.open_model(str(FIXTURES / "t5_tiny"))
    qtbot.waitUntil(lambda: w.trace is not None, timeout=10000)
    for section in ("Encoder", "Decoder"):
        view = _show(w, section, "scores")
        qtbot.waitUntil(lambda: "Scores" in view.scores.title, timeout=10000)
        assert "q·kᵀ (not scaled) + position bias" in view.scores.title
        assert "√" not in view.scores.title
    _show(w, "Decoder", "cross_attention")
    assert w.cross_view.scores.title.startswith("Scores q·kᵀ (not scaled)")
    w.workers.wait()


def test_translate_follows_an_edited_source(qtbot, window):
    """Translate after the source was edited translates the new source (it kept the old
    translation: the old target was teacher-forced into the new source's pass)."""
    from transformer_stepper.state import seq2seq_work as work

    window.translate()
    qtbot.waitUntil(lambda: window.target_generated and window.target_box.text() != "", timeout=20000)
    old_target = window.target_box.text()
    new_source = "The money in the bank."
    window.source_box.setText(new_source)
    window.source_box.textEdited.emit(new_source)
    assert window.target_box.text() == ""                  # the old translation went with its source
    window.translate()                                     # at once, before the pause's retrace
    qtbot.waitUntil(lambda: window.traced_source == new_source and window.target_generated,
                    timeout=20000)
    _, trace, expected = work.translate(window.model, new_source, "", 0)
    assert window.target_box.text() == expected
    assert window.trace.encoder.n_seq == trace.encoder.n_seq
    np.testing.assert_array_equal(window.trace.decoder.input_ids, trace.decoder.input_ids)
