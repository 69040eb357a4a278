"""The logit lens a block at a time (core/trace/lens_blocks.py): the blocks asked for are computed and
no others; assembled, they are the lens computed whole, bit for bit; the prediction stage reads
the lens's final row; a trace extended or retraced from another reuses the blocks of the rows it
shares and is still bit-identical to computing its lens afresh."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.trace import lens_blocks
from transformer_stepper.core.trace.generate import (
    cached_lens,
    lens,
    lens_logits,
    lens_ready,
    predictions,
    predictions_ready)
from transformer_stepper.core.trace.lens_blocks import cached_trace_lens, next_piece, trace_lens
from transformer_stepper.core.model.ops import softmax
from transformer_stepper.core.model.tokenize import Encoded

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LONG = ("The bank of the river was steep and green. She went to the bank to deposit money. "
        "He walked along the river bank until the sun set behind the hills. ") * 4


def reference(model, trace, top, block):
    """The lens computed whole, the plain way: every state's logits at fixed blocks of `block`
    positions (BLAS sums other row counts in another order), softmax, a full stable sort."""
    n_states = model.config.n_layer + 1
    ids = np.empty((n_states, trace.n_seq, top), np.int64)
    probabilities = np.empty((n_states, trace.n_seq, top), np.float32)
    final = np.empty((n_states, trace.n_seq), np.float32)
    for first in range(0, trace.n_seq, block):
        rows = slice(first, min(first + block, trace.n_seq))
        final_ids = None
        for state in reversed(range(n_states)):
            p = softmax(lens_logits(model, trace, state, rows))
            order = np.argsort(-p, axis=-1, kind="stable")[:, :top]
            ids[state, rows], probabilities[state, rows] = order, np.take_along_axis(p, order, -1)
            final_ids = order[:, 0] if final_ids is None else final_ids
            final[state, rows] = p[np.arange(len(p)), final_ids]
    return ids, probabilities, final


def assert_same_bits(result, expected):
    ids, probabilities, final = expected
    np.testing.assert_array_equal(result.ids, ids)
    np.testing.assert_array_equal(result.probabilities.view(np.uint32), probabilities.view(np.uint32))
    np.testing.assert_array_equal(result.final_probabilities.view(np.uint32), final.view(np.uint32))
    np.testing.assert_array_equal(result.final_ids, ids[-1, :, 0])


@pytest.fixture(params=["builtin", "gpt2_tiny_lm"])
def model_and_block(request, monkeypatch):
    # blocks smaller than the app's 64, so that the models' short contexts hold several
    block = 32 if request.param == "builtin" else 16        # (128 and 48 positions)
    monkeypatch.setattr(lens_blocks, "LENS_BLOCK", block)
    return load_model(None if request.param == "builtin" else FIXTURES / request.param), block


def test_the_lens_equals_the_lens_computed_whole_bit_for_bit(model_and_block):
    model, block = model_and_block
    trace = model.trace(LONG)
    assert trace.n_seq > 2 * block
    assert_same_bits(lens(model, trace, top=5), reference(model, trace, 5, block))
    assert lens_ready(trace) and cached_lens(trace) is lens(model, trace, top=3)


def test_only_the_blocks_asked_for_are_computed(model_and_block):
    model, block = model_and_block
    trace = model.trace(LONG)
    cache = trace_lens(model, trace, 5)
    window = cache.blocks_of(block + 3, 5)                 # positions inside the second block
    assert list(window) == [1]
    cache.compute(cache.missing(range(cache.n_states), window))
    assert cache.ready(range(cache.n_states), window) and not cache.ready([0], [0])
    assert not cache.complete and not lens_ready(trace)
    partial = cache.assemble()
    assert not partial.complete
    rows = cache.rows(1)
    assert partial.known[:, rows].all() and not partial.known[:, :rows.start].any()
    assert np.isnan(partial.probabilities[:, :rows.start]).all() and (partial.ids[:, :rows.start] == -1).all()
    ids, probabilities, final = reference(model, trace, 5, block)
    np.testing.assert_array_equal(partial.ids[:, rows], ids[:, rows])
    np.testing.assert_array_equal(partial.final_probabilities[:, rows], final[:, rows])
    assert_same_bits(lens(model, trace), (ids, probabilities, final))    # the rest filled in


def test_the_prediction_is_the_lens_final_row_from_the_same_cache(model_and_block):
    model, block = model_and_block
    trace = model.trace(LONG)
    assert not predictions_ready(trace, model)
    shared = predictions(trace, 5, model)
    assert predictions_ready(trace, model)
    cache = cached_trace_lens(trace)
    final = cache.n_states - 1
    assert cache.ready([final], range(cache.n_blocks)) and not cache.ready([0], [0])
    # the same numbers as the prediction stage's own top-k over the trace's logits
    own = predictions(model.trace(LONG), 5)
    np.testing.assert_array_equal(shared.ids, own.ids)
    np.testing.assert_array_equal(shared.probabilities.view(np.uint32), own.probabilities.view(np.uint32))
    whole = lens(model, trace)          # the final row is not computed again for the lens
    np.testing.assert_array_equal(whole.ids[-1], shared.ids)


def test_an_extended_trace_reuses_the_shared_blocks_and_equals_a_recomputation(model_and_block):
    model, block = model_and_block
    prompt = model.trace(LONG)
    prompt = model.truncate(prompt, 2 * block + 5)          # two whole blocks and a partial one
    lens(model, prompt)
    longer = model.extend(prompt, [3, 4, 5])
    result = lens(model, longer)
    n_states = model.config.n_layer + 1
    assert cached_trace_lens(longer).reused == 2 * n_states     # the partial block recomputed
    assert_same_bits(result, reference(model, longer, 5, block))


def test_an_edited_text_reuses_the_blocks_before_the_edit(model_and_block):
    model, block = model_and_block
    first = model.trace(LONG)
    lens(model, first)
    cut = first.n_seq - block - 5               # the last whole block and a bit of the one before
    ids = np.concatenate([first.input_ids[:cut], (first.input_ids[cut:] + 1) % model.config.n_vocab])
    edited = Encoded(tokens=first.tokens, input_ids=ids, token_type_ids=np.zeros(len(ids), np.int64),
                     offsets=first.offsets, special_tokens_mask=first.special_tokens_mask, truncated=False)
    second = model.retrace(first, edited, "an edited text")
    shared = second.n_seq - second.computed_rows
    assert shared == cut
    result = lens(model, second)
    n_states = model.config.n_layer + 1
    assert cached_trace_lens(second).reused == (shared // block) * n_states
    assert_same_bits(result, reference(model, second, 5, block))


def test_the_next_piece_is_what_is_shown_then_the_nearest(model_and_block):
    model, block = model_and_block
    trace = model.trace(LONG)
    cache = trace_lens(model, trace, 5)
    final, n_states = cache.n_states - 1, cache.n_states
    piece = next_piece(cache, [2], n_states + 1)         # the final state first, and the shown
    assert piece == [(s, 2) for s in range(final, -1, -1)]      # block alone while it is missing
    cache.compute(piece)
    assert next_piece(cache, [2], 1)[0][1] in (1, 3)            # then a neighbour
    cache.compute(cache.everything())
    assert next_piece(cache, [0], 4) == []
