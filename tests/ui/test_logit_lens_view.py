"""The logit lens view draws as soon as the blocks on screen are computed (the table's column
window and the selected position's column), never a number for a cell not computed yet; the
rest fills in from the worker; scrolling asks for the new window's blocks first."""
import time

import numpy as np

from transformer_stepper.core.trace import lens_blocks
from transformer_stepper.core.trace.generate import lens_logits
from transformer_stepper.core.trace.lens_blocks import cached_trace_lens
from transformer_stepper.core.model.ops import softmax
from transformer_stepper.ui.stages import logit_lens

from .conftest import gpt2_laptop_window

TIMEOUT = 20_000


def _long_text_window(qtbot, loaded_window):
    # the GPT-2 fixture at laptop size on a text of many lens blocks, its last token selected
    window = gpt2_laptop_window(qtbot, loaded_window, "the bank of the river was full of water and the money " * 4)
    window.session.select_token(window.session.trace.n_seq - 1)
    return window


def test_the_view_draws_what_is_on_screen_first_and_fills_in_the_rest(qtbot, loaded_window, monkeypatch):
    monkeypatch.setattr(lens_blocks, "LENS_BLOCK", 4)       # many blocks for a short text
    monkeypatch.setattr(logit_lens, "PIECE", 2)
    window = _long_text_window(qtbot, loaded_window)
    session = window.session
    drawn = []
    session.set_stage("logit_lens")
    view = window.stepper.current_view()
    view.updated.connect(lambda: drawn.append(view.lens))
    qtbot.waitUntil(lambda: bool(drawn), timeout=TIMEOUT)
    trace, model = session.trace, session.model
    first = drawn[0]
    assert not first.complete                      # drawn before the whole lens was computed
    cache = cached_trace_lens(trace)
    selected_block = (trace.n_seq - 1) // 4
    assert first.known[:, cache.rows(selected_block)].all()       # the curve's column
    # a cell not computed is NaN (hatched), '…', and says so on hover; never a number
    assert np.array_equal(np.isnan(first.probabilities[..., 0]), ~first.known)
    assert (first.ids[~first.known] == -1).all()
    row, col = np.argwhere(~first.known)[0]
    assert "computing the logit lens" in view._describe(int(row), int(col))
    # the rest arrives from the worker, and the table then shows the whole lens
    qtbot.waitUntil(lambda: view.lens.complete and view.is_current(), timeout=TIMEOUT)
    assert not np.isnan(view.table.values).any()
    for state in (0, model.config.n_layer):
        p = softmax(lens_logits(model, trace, state).astype(np.float64))
        np.testing.assert_allclose(view.table.values[state], p.max(-1), atol=1e-5)
    assert all(name != logit_lens.NOT_YET for row in view.names for name in row)


def test_scrolling_asks_for_the_new_window_first(qtbot, loaded_window, monkeypatch):
    monkeypatch.setattr(lens_blocks, "LENS_BLOCK", 4)
    monkeypatch.setattr(logit_lens, "PIECE", 1)
    compute = lens_blocks.TraceLens.compute

    def slowly(cache, pieces, **progress):                # a piece of a big model's time: the scroll
        time.sleep(0.03)                      # comes long before the lens is complete
        compute(cache, pieces, **progress)

    monkeypatch.setattr(lens_blocks.TraceLens, "compute", slowly)
    window = _long_text_window(qtbot, loaded_window)
    session = window.session
    asked = []
    original = lens_blocks.next_piece
    monkeypatch.setattr(logit_lens, "next_piece",
                        lambda cache, shown, size: asked.append(list(shown)) or original(cache, shown, size))
    session.set_stage("logit_lens")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    first, count, total = view.table.column_window()
    assert count < total and first > 0
    asked.clear()
    view.scroll.setValue(0)                            # to the start: blocks 0.. come first
    assert not cached_trace_lens(session.trace).complete
    qtbot.waitUntil(lambda: bool(asked), timeout=TIMEOUT)
    assert asked[0][0] == 0
    qtbot.waitUntil(lambda: view.lens.complete and view.is_current(), timeout=TIMEOUT)
    # redrawn as the rest arrived: the window stayed where the user scrolled it
    assert view.table.column_window()[0] == 0 and view.scroll.value() == 0


def test_selecting_a_position_the_worker_computed_in_the_background(qtbot, loaded_window, monkeypatch):
    # a block computed after the table was drawn and not shown (no redraw): selecting a
    # position in it reads that block, not the lens as drawn (where its ids are -1)
    monkeypatch.setattr(lens_blocks, "LENS_BLOCK", 4)
    monkeypatch.setattr(logit_lens, "PIECE", 1)
    compute = lens_blocks.TraceLens.compute

    def slowly(cache, pieces, **progress):
        time.sleep(0.05)
        compute(cache, pieces, **progress)

    monkeypatch.setattr(lens_blocks.TraceLens, "compute", slowly)
    window = _long_text_window(qtbot, loaded_window)
    session = window.session
    session.set_stage("logit_lens")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    cache = cached_trace_lens(session.trace)
    shown = set(view._shown_blocks(cache))
    drawn_known = view.lens.known.copy()

    def background_block():
        for b in range(cache.n_blocks):
            if b not in shown and cache.ready(range(cache.n_states), [b]):
                return b
        return None

    qtbot.waitUntil(lambda: background_block() is not None, timeout=TIMEOUT)
    b = background_block()
    position = b * 4
    assert not drawn_known[:, position].any()     # not in the table as drawn
    session.select_token(position)
    assert view.lens.final_ids[position] >= 0       # read from the block the worker made
    assert view.lens.known[:, position].all()
    assert view.curve.title.startswith("p('") and f"after {position} " in view.curve.title


def test_a_piece_for_a_replaced_text_stops_at_its_next_block(qtbot, loaded_window, monkeypatch):
    # a piece of a big model's lens takes seconds: typing on cancels it (at its next block)
    # instead of the new text's lens waiting behind it
    monkeypatch.setattr(lens_blocks, "LENS_BLOCK", 4)
    monkeypatch.setattr(logit_lens, "PIECE", 6)
    fill = lens_blocks.TraceLens._fill
    filled = []

    def slowly(cache, model, trace, state, block):
        filled.append(trace.text)
        time.sleep(0.1)
        fill(cache, model, trace, state, block)

    monkeypatch.setattr(lens_blocks.TraceLens, "_fill", slowly)
    window = _long_text_window(qtbot, loaded_window)
    session = window.session
    session.set_stage("logit_lens")
    view = window.stepper.current_view()
    old = session.trace.text
    qtbot.waitUntil(lambda: old in filled, timeout=TIMEOUT)          # a piece for the old text runs
    with qtbot.waitSignal(session.traceChanged, timeout=TIMEOUT):
        session.set_text("the river bank", immediate=True)
    changed = len(filled)
    qtbot.waitUntil(lambda: view.is_current() and view.lens.complete, timeout=TIMEOUT)
    new = session.trace.text
    assert new in filled[changed:]
    # after the change, at most the pair under way (its block's final state and its own) ran
    # on for the old text, not the rest of its piece of 6 pairs
    assert filled[changed:filled.index(new, changed)].count(old) <= 2, filled
