"""The small things of issue 24: a 12-head grid without a scrollbar, the token table's columns
whole and its pieces spelled as on every axis ('␣'), an undecodable generated id named, the
truncation of a long paste said with how much was dropped, and a head shortcut no window
manager takes."""
from __future__ import annotations

import numpy as np
from PySide6.QtGui import QKeySequence

from tests.builders import random_params, tiny_config, tokenizer_for, write_npz_model
from transformer_stepper import load_model
from transformer_stepper.core.analysis.labels import kept_characters
from transformer_stepper.ui.stepper.generate_bar import undecodable_note

from .conftest import TEXT

TIMEOUT = 15_000


def test_twelve_heads_fit_without_a_scrollbar(qtbot, window, tmp_path):
    config = tiny_config("bert", n_head=12, d_model=48, n_layer=6).replace(name="twelve-heads")
    path = write_npz_model(tmp_path / "twelve.npz", config, random_params(config, seed=1), tokenizer_for("bert"))
    window.resize(1366, 768)
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        window.open_model(str(path))
    view = window.tabs.show_tab("interventions")
    qtbot.waitUntil(lambda: view.heads.isVisible(), timeout=TIMEOUT)
    view.layout().activate()
    heads = view.heads
    assert heads.columnCount() == 12
    assert heads.horizontalScrollBar().maximum() == 0, "a head is hidden behind the scrollbar"
    last = heads.visualItemRect(heads.item(0, 11))
    assert last.right() <= heads.viewport().width()


def test_the_token_table_is_whole_and_spelled_as_the_axes(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    session.set_stage("tokenize")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    view.layout().activate()
    table, model = view.table, view.table_model
    pieces = [model.index(i, 0).data() for i in range(model.rowCount())]
    assert pieces == session.token_labels() and not any("Ġ" in p for p in pieces)
    assert any(p.startswith("␣") for p in pieces)
    assert model.index(1, 0).data(0x03).startswith("the tokenizer's own piece")     # tooltip
    for column in range(model.columnCount()):
        assert table.columnWidth(column) >= table.sizeHintForColumn(column), column
    assert table.horizontalScrollBar().maximum() == 0, "the last column is clipped"
    text = window.stepper.explanation.toPlainText()
    assert "␣ marks the space" in text and "Ġ" in text


def test_a_generated_id_that_is_no_whole_character_is_named():
    from pathlib import Path

    model = load_model(str(Path(__file__).parents[1] / "fixtures" / "gpt2_tiny_lm"))
    lead_byte = model.tokenizer.token_to_id("â")          # the first byte of '’' and many more
    trace = model.trace("the bank")
    assert undecodable_note(trace) == ""
    grown = model.extend(trace, [lead_byte])
    assert "\ufffd" in grown.text
    assert f"token id {lead_byte}" in undecodable_note(grown)


def test_a_long_paste_says_how_much_was_dropped(qtbot, loaded_window):
    window = loaded_window("bert")                        # n_ctx 16
    session = window.session
    text = " ".join([TEXT["bert"]] * 12)
    with qtbot.waitSignal(session.traceChanged, timeout=TIMEOUT):
        session.set_text(text, immediate=True)
    trace = session.trace
    assert trace.truncated and trace.n_seq == trace.config.n_ctx
    kept = kept_characters(trace)
    # the tokens cover exactly the kept characters: re-tracing them gives the same ids
    np.testing.assert_array_equal(session.model.trace(text[:kept]).input_ids, trace.input_ids)
    assert 0 < kept < len(text)
    note = window.stepper.text_problem.text()
    assert window.stepper.text_problem.isVisible()
    assert f"first {kept:,} of {len(text):,} characters" in note and f"last {len(text) - kept:,}" in note
    with qtbot.waitSignal(session.traceChanged, timeout=TIMEOUT):
        session.set_text(TEXT["bert"], immediate=True)
    assert not window.stepper.text_problem.isVisible()


def test_the_head_has_a_shortcut_window_managers_leave_alone(qtbot, loaded_window):
    window = loaded_window("bert")
    actions = {a.text(): a for a in window.go_menu.actions()}
    assert QKeySequence("Ctrl+]") in actions["Next &Head"].shortcuts()
    assert QKeySequence("Alt+Shift+Down") in actions["Next &Head"].shortcuts()
    assert QKeySequence("Ctrl+[") in actions["Previous Hea&d"].shortcuts()
    actions["Next &Head"].trigger()
    assert window.session.head == 1
