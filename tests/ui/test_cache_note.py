"""The KV-cache note of an attention stage says why positions were reused: a generation step only
when the new positions are generated tokens (a walk's or a typed sentence that shares the old
one's beginning is said to be that), and one position is 'position 0', not 'positions 0–0'."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from transformer_stepper import load_model
from transformer_stepper.ui.stages.notes import cache_note

GPT2 = Path(__file__).resolve().parents[1] / "fixtures" / "gpt2_tiny_lm"


def test_a_new_sentence_sharing_the_beginning_is_no_generation_step():
    model = load_model(str(GPT2))
    first = model.trace("the bank of the river")
    edited = model.retrace(first, model.encode("the bank of the sea"), "the bank of the sea")
    assert 0 < edited.n_seq - edited.computed_rows < edited.n_seq
    note = cache_note(edited, per_head=True)
    assert "generation step" not in note and "unchanged since the pass before" in note
    stepped = model.extend(first, [int(first.input_ids[1])])
    assert bool(np.all(stepped.generated[first.n_seq:]))
    assert "(a generation step)" in cache_note(stepped, per_head=True)


def test_one_reused_position_is_said_once():
    model = load_model(str(GPT2))
    one = model.truncate(model.trace("the bank"), 1)
    assert one.n_seq == 1
    grown = model.extend(one, [int(one.input_ids[0])])
    note = cache_note(grown, per_head=True)
    assert "positions 0–0" not in note and "of position 0 (1 of 2)" in note
    assert "computed only position 1." in note
