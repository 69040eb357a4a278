"""The Compare tab: presets, live edits (only the changed sentence is traced), picking tokens,
bad input, the layer and head from the toolbar, exports, presets of one's own; and the stepper's text,
model and stage are never touched."""
import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from tests.builders import random_params, tiny_config, tokenizer_for, write_npz_model
from transformer_stepper.core.analysis.compare import MAX_SENTENCES
from transformer_stepper.ui.compare import CompareView, presets
from transformer_stepper.ui.compare.bundle import file_name
from transformer_stepper.ui.export import menu

from .conftest import builtin_model_or_skip

BANK = presets.BUILTIN[0]
TIMEOUT = 15_000


@pytest.fixture
def compare_window(qtbot, window):
    """The window on the built-in model with the Compare tab shown and computed."""
    builtin_model_or_skip()
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        window.open_model(None)
    view = window.tabs.view("compare")
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        window.tabs.show_tab("compare")
    yield window
    assert view.shutdown(10_000)
    assert view.state.workers.active() == 0


def compare_view(window) -> CompareView:
    return window.tabs.view("compare")


def edit(qtbot, view, lines, word=None):
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        view.set_sentences(lines, word)


def click_token(qtbot, view, sentence, token):
    strip = view.strips.rows[sentence].strip
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        qtbot.mouseClick(strip, Qt.MouseButton.LeftButton, pos=strip.boxes[token].center().toPoint())


def test_tabs_and_the_bank_preset(compare_window):
    window = compare_window
    assert [window.tabs.tabText(i) for i in range(window.tabs.count())][:2] == ["Stepper", "Compare"]
    view = compare_view(window)
    comparison = view.state.comparison
    assert [o.label for o in comparison.occurrences] == ["S1 bank", "S2 bank", "S3 bank", "S4 bank"]
    assert view.editor.toPlainText().splitlines() == list(BANK.sentences)
    assert view.word_box.text() == "bank" and view.preset_box.currentText() == BANK.name
    # every plot drawn and shown, numbers in the titles and the explanation
    shown = [name for _, name, figure in view.figures.plots() if figure.isVisible()]
    assert shown == ["lookup_row", "entry", "cosine_across_layers", "map", "nearest_words", "attention"]
    assert "difference 0" in view.figures.lookup.title
    assert f"id {comparison.occurrences[0].token_id}" in view.figures.lookup.title
    text = view.explanation.toPlainText()
    assert "exactly 0" in text and "separates from" in text and "layer 0" in text
    assert f"{comparison.pair_cosines[0, 0]:.3f}" in text
    for row, occ in zip(view.strips.rows, comparison.occurrences):
        assert row.isVisible() and row.strip.selected == occ.position
    # the stepping keys belong to the stepper's tab
    assert not window.next_action.isEnabled() and not window.back_action.isEnabled()
    window.tabs.show_tab("stepper")
    assert window.next_action.isEnabled()


def test_editing_one_sentence_traces_only_that_one(qtbot, compare_window):
    view = compare_view(compare_window)
    before = view.state.comparison
    lines = list(BANK.sentences)
    lines[1] = "He waited on the bank near the reeds ."
    edit(qtbot, view, lines)
    after = view.state.comparison
    assert view.state.result.traced == 1
    for i in (0, 2, 3):
        assert after.sentences[i].trace is before.sentences[i].trace
    assert after.sentences[1].text == lines[1]
    assert view.strips.rows[1].strip.labels[5] == "bank" and view.strips.rows[1].strip.selected == 5


def test_a_sentence_without_the_word_is_named_and_the_others_still_shown(qtbot, compare_window):
    view = compare_view(compare_window)
    lines = list(BANK.sentences[:2]) + ["", "The dog gave a loud bark at the cat ."]
    edit(qtbot, view, lines)
    comparison = view.state.comparison
    assert [o.number for o in comparison.occurrences] == [1, 2]    # the empty line is ignored
    note = view.strips.rows[2].note
    assert note.isVisible() and "no 'bank' in it" in note.text() and "click a token" in note.text()
    assert "sentence 3" in view.explanation.toPlainText()
    assert view.figures.cosines.isVisible()
    # clicking a token of that sentence compares it: different pieces, and the plots say so
    click_token(qtbot, view, 2, view.strips.rows[2].strip.labels.index("bark"))
    comparison = view.state.comparison
    assert [o.piece for o in comparison.occurrences] == ["bank", "bank", "bark"]
    assert "pieces differ" in view.figures.lookup.title
    assert "different pieces" in view.explanation.toPlainText()


def test_more_than_eight_sentences_says_so_and_compares_eight(qtbot, compare_window):
    view = compare_view(compare_window)
    lines = ["He sat on the bank of the river ."] + list(BANK.sentences) * 2
    edit(qtbot, view, lines)
    assert view.message.isVisible() and f"at most {MAX_SENTENCES}" in view.message.text()
    assert len(view.state.comparison.sentences) == MAX_SENTENCES
    edit(qtbot, view, list(BANK.sentences))
    assert not view.message.isVisible()


def test_a_word_of_several_pieces_says_the_first_is_used(qtbot, compare_window):
    view = compare_view(compare_window)
    edit(qtbot, view, ["He sat on the bank of the river .", "She kept the gold in the bank ."],
         word="xyzzy")
    assert view.state.comparison.occurrences == ()
    assert "not in the model's vocabulary" in view.strips.rows[0].note.text()
    assert not view.figures.cosines.isVisible() and view.placeholder.isVisible()


def test_word_box_and_click_pick_tokens(qtbot, compare_window):
    view = compare_view(compare_window)
    view.word_box.selectAll()
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        qtbot.keyClicks(view.word_box, "the")                # typed: recomputed after the pause
    assert all(o.piece == "the" for o in view.state.comparison.occurrences)
    first = view.state.comparison.occurrences[0].position
    click_token(qtbot, view, 0, first + 1)
    assert view.state.comparison.occurrences[0].position == first + 1
    assert view.strips.rows[0].strip.selected == first + 1


def test_the_stepper_is_untouched(qtbot, compare_window):
    window = compare_window
    session = window.session
    text, stage, trace, model = session.text, session.stage_key, session.trace, session.model
    view = compare_view(window)
    edit(qtbot, view, list(presets.BUILTIN[3].sentences), word="bark")
    click_token(qtbot, view, 1, 2)
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        view.load_preset(presets.BUILTIN[1])
    assert (session.text, session.stage_key, session.trace, session.model) == (text, stage, trace, model)
    assert window.stepper.text_box.text() == text


def test_layer_and_head_from_the_toolbar(qtbot, compare_window):
    window = compare_window
    view = compare_view(window)
    comparison = view.state.comparison
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        window.layer_box.setCurrentIndex(1)
    assert view.state.comparison is comparison             # only the attention was read again
    assert view.state.result.request.layer == 1
    assert "layer 1, head 0" in view.figures.attention.title
    assert view.figures.cosines.layer_line.value() == 2
    window.head_box.setCurrentIndex(2)
    assert "layer 1, head 2" in view.figures.attention.title
    occ = comparison.occurrences[0]
    weights = comparison.sentences[occ.sentence].trace.layer("attn_weights", 1)[2, occ.position]
    assert np.array_equal(view.figures.attention.weights[0], weights)


def test_every_preset_loads(qtbot, compare_window):
    view = compare_view(compare_window)
    for preset in presets.BUILTIN:
        with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
            view.preset_box.setCurrentIndex(view.preset_box.findText(preset.name))
            view.preset_box.activated.emit(view.preset_box.currentIndex())
        comparison = view.state.comparison
        assert len(comparison.occurrences) == len(preset.sentences) and not comparison.problems
        assert {o.piece for o in comparison.occurrences} == {preset.word}


def test_presets_of_ones_own(qtbot, compare_window):
    view = compare_view(compare_window)
    edit(qtbot, view, list(BANK.sentences[:2]), word="the")
    dialog = view.ask_preset_name()
    dialog.setTextValue("river twice")
    dialog.accept()
    assert view.preset_box.currentText() == "river twice" and view.remove_button.isEnabled()
    saved = presets.user_presets(compare_window.settings)
    assert [(p.name, p.word, p.sentences) for p in saved] == [("river twice", "the", BANK.sentences[:2])]
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        view.load_preset(BANK)
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        view.load_preset(saved[0])
    assert view.word_box.text() == "the" and len(view.state.comparison.occurrences) == 2
    view.preset_box.setCurrentIndex(view.preset_box.findText("river twice"))
    view.remove_current_preset()
    assert presets.user_presets(compare_window.settings) == []
    assert view.preset_box.findText("river twice") == -1


def test_right_click_exports_each_figure(qtbot, compare_window, tmp_path, monkeypatch):
    view = compare_view(compare_window)
    for number, name, figure in view.figures.plots():
        target = tmp_path / f"{name}.svg"
        monkeypatch.setattr(menu, "ask_save_path", lambda *a, t=target: str(t))
        png, svg = figure.scene().contextMenu
        assert png.text() == "Export as PNG…"
        svg.trigger()
        assert target.read_text().lstrip().startswith("<?xml"), name
    monkeypatch.setattr(menu, "ask_save_path", lambda *a: str(tmp_path / "map"))
    view.figures.map.scene().contextMenu[0].trigger()
    assert QImage(str(tmp_path / "map.png")).width() > 0


def test_map_click_compares_that_token(qtbot, compare_window):
    view = compare_view(compare_window)
    figure, comparison = view.figures.map, view.state.comparison
    pool = 2                                          # a word of sentence 1 other than 'bank'
    assert pool != comparison.occurrence_pool[0]
    with qtbot.waitSignal(figure.pointClicked) as clicked:
        figure.tokenClicked.emit(pool)
    sentence, position = clicked.args
    assert (sentence, position) == (int(comparison.pool_sentence[pool]), int(comparison.pool_position[pool]))
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        view.state.pick(sentence, position)
    assert view.state.comparison.occurrences[0].position == position


def test_rotary_model_shows_the_rotation(qtbot, window, tmp_path):
    config = tiny_config("llama", activation="relu", name="tiny-rotary")
    path = write_npz_model(tmp_path / "rotary.npz", config, random_params(config, seed=2),
                           tokenizer_for("llama"))
    window.session.set_text("the bank", immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        window.open_model(str(path))
    view = window.tabs.view("compare")
    view.set_sentences(["the bank", "a cat sat by the bank"], word="bank")
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        window.tabs.show_tab("compare")
    comparison = view.state.comparison
    assert comparison.pair_cosines[0, 0] == pytest.approx(1.0, abs=1e-12)
    assert view.figures.rotation.isVisible() and not view.figures.entry.isVisible()
    assert "rotate" in view.figures.rotation.title
    assert "identical" in view.explanation.toPlainText()
    assert [name for _, name, _ in view.figures.plots()][1] == "entry_rotation"
    assert view.shutdown(10_000)


def test_opening_another_model_recomputes(qtbot, compare_window, model_paths):
    window = compare_window
    view = compare_view(window)
    with qtbot.waitSignal(view.updated, timeout=TIMEOUT):
        window.open_model(str(model_paths["bert"]))
    assert view.state.comparison.sentences[0].trace.config.family == "bert"


def test_hover_reads_exact_values(qtbot, compare_window):
    view = compare_view(compare_window)
    figure = view.figures.lookup
    text = figure.hover_at(3.0, 4.0)                       # dim 3 of the first difference row
    assert "E[" in text and "same id: exactly 0" in text
    text = view.figures.nearest.hover_at(0.0, 0.0)
    assert text.startswith("embedding, S1 bank:") and "cos" in text
    assert view.figures.attention.hover_at(1.0, 0.1).startswith("S1 'bank'")


def test_file_menu_exports_the_compare_figures_on_the_compare_tab(compare_window, tmp_path,
                                                                  monkeypatch):
    """File → Export on the Compare tab writes the Compare figures and compare.csv (not the
    stepper's stage), into the folder asked for; on the stepper tab the entry is the stage's."""
    window = compare_window
    view = compare_view(window)
    entries = {a.text(): a for a in window.file_menu.actions()}
    action = entries["Export &Figures of This Tab…"]
    assert not entries["Export &All Stages…"].isVisible()
    from transformer_stepper.ui.export import dialogs

    monkeypatch.setattr(dialogs, "ask_folder", lambda *a: str(tmp_path))
    action.trigger()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "compare.csv" in names
    layer, head = view._layer_head()
    expected = sorted(file_name(number, name, layer, head, "png") for number, name, _ in view.figures.plots())
    assert len(expected) == 6 and [n for n in names if n.endswith(".png")] == expected
    assert QImage(str(tmp_path / names[0])).width() > 100
    window.tabs.show_tab("stepper")
    assert action.text() == "Export Current &Stage…" and entries["Export &All Stages…"].isVisible()
