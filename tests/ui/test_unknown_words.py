"""Words outside the vocabulary are said: "My dragon ate pizza yesterday" is five [UNK] on the
built-in model — marked in the token strip and the tokenize table, counted and named in a note,
and the model's vocabulary is one click away."""
from __future__ import annotations

from transformer_stepper.core.analysis.unknown_words import unknown_words

from .conftest import builtin_model_or_skip

TEXT = "My dragon ate pizza yesterday"


def test_unknown_words_are_marked_counted_and_the_vocabulary_shown(qtbot, window):
    session = window.session
    session.set_text(TEXT, immediate=True)
    with qtbot.waitSignal(session.traceChanged, timeout=20_000):
        window.open_model(str(builtin_model_or_skip()))
    trace, tokenizer = session.trace, session.model.tokenizer
    unknown = unknown_words(trace, tokenizer.unknown_id)
    assert trace.tokens.count("[UNK]") == unknown.count == 5
    assert unknown.words == ("My", "dragon", "ate", "pizza", "yesterday")
    stepper = window.stepper
    assert stepper.tokens.strip.unknown == list(unknown.mask)
    note = stepper.unknown_note
    assert note.isVisible() and "5 words" in note.text() and "dragon" in note.text()
    session.set_stage("tokenize")
    view = stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    table = view.table_model
    kinds = [table.index(i, 2).data() for i in range(table.rowCount())]
    assert kinds.count("unknown") == 5 and kinds[0] == "yes"
    note.linkActivated.emit("vocabulary")
    dialog = window.vocabulary_dialog
    assert dialog.entries.rowCount() == len(tokenizer.vocabulary()) == tokenizer.vocab_size
    dialog.filter.setText("queen")
    assert dialog.shown.rowCount() >= 1
    assert all("queen" in dialog.shown.index(i, 0).data() for i in range(dialog.shown.rowCount()))
    dialog.close()
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text("the queen rode to the bank", immediate=True)
    assert not note.isVisible() and not any(stepper.tokens.strip.unknown)


def test_byte_level_models_have_no_unknown_words(qtbot, loaded_window):
    window = loaded_window("gpt2")
    assert window.session.model.tokenizer.unknown_id is None or not window.stepper.unknown_note.isVisible()
