"""Growing a layer's detail with the residual stream (core/trace/row_blocks.py): an edited or extended
causal trace keeps the detail the previous trace holds, cut to the shared rows, and appends the
rows its pass computed; that detail is bit for bit what computing the layer afresh on the new
trace gives (block by block, as the passes computed the rows), its layer_in and layer_out are
the residual stream's own arrays' values, and it equals a fresh trace of the text to float
rounding."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.trace import row_blocks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# GPT-2 (learned positions); Llama (rotary, GQA 4 heads / 2); Gemma 2 (local layers with a
# window of 4, soft-capped scores); Gemma 3 (local layers with their own rope base, q/k norms)
FAMILIES = ["gpt2_tiny_lm", "llama_tiny", "gemma2_tiny", "gemma3_tiny"]
BASE = "the bank of the river was steep and the water was cold"
# each edit applied to the trace of the one before: at the end, in the middle, deletions
# (at the end, in the middle, into a block), then a word at a time (blocks merge)
EDITS = [BASE + " and green",
         "the bank of the sea was steep and the water was cold and green",
         "the bank of the sea was steep and the water was cold",
         "the bank of the sea was steep and the water",
         "the bank of the sea was and the water",
         "the bank of",
         "the bank of the"]
WORDS = ["river", "was", "steep", "and", "the", "water", "was", "cold", "and", "green"]


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    return load_model(FIXTURES / request.param)


def _every_layer(model):
    return tuple(range(model.config.n_layer))


def assert_grown_equals_recomputed(model, trace, layers) -> None:
    """The `layers` (held: grown or cut) equal computing them again, array for array, bit for
    bit; layer_in/layer_out are the residual stream's values; a fresh trace agrees to rounding."""
    held = dict(trace.cache.held())
    assert set(held) == set(layers), "the layers asked for, held by the previous trace, were grown"
    fresh = model.trace_encoded(model.encode(trace.text), trace.text)
    trace.cache.clear()
    for layer, grown in held.items():
        again = trace.detail(layer)
        assert again is not grown and list(again) == list(grown)
        for name, value in grown.items():
            assert value.shape == again[name].shape and value.dtype == again[name].dtype, name
            assert np.array_equal(value, again[name]), f"layer {layer} {name}: grown != recomputed"
            expected = fresh.layer(name, layer)     # (rounding relative to the array's scale)
            scale = max(1.0, float(np.abs(expected[np.isfinite(expected)]).max(initial=0)))
            np.testing.assert_allclose(value, expected, atol=1e-4 * scale, rtol=1e-3,
                                       err_msg=f"layer {layer} {name}")
        for name in ("layer_in", "layer_out"):
            assert np.array_equal(grown[name], trace.residual[name][layer]), name
        aliases = lambda d: {(a, b) for a in d for b in d if a < b and d[a] is d[b]}  # noqa: E731
        assert aliases(grown) == aliases(again), "one array under two names stays one"


def test_edits_grow_the_held_layers_bit_for_bit(model):
    trace = model.trace(BASE, detail_layers=_every_layer(model))
    for text in EDITS:
        previous = trace
        trace = model.retrace(previous, model.encode(text), text, detail_layers=_every_layer(model))
        shared = model.shared_rows(previous, model.encode(text))
        assert 0 < trace.n_seq - trace.computed_rows <= shared, text
        assert trace.cache.computed == 0, "grown or cut, not computed"
        assert_grown_equals_recomputed(model, trace, _every_layer(model))


def test_typing_a_word_at_a_time_keeps_few_blocks(model):
    trace = model.trace("the bank", detail_layers=_every_layer(model))
    merged = False
    for word in WORDS:
        text = trace.text + " " + word
        trace = model.retrace(trace, model.encode(text), text, detail_layers=_every_layer(model))
        merged |= trace.computed_rows > trace.n_seq - len(model.encode(text[:-len(word) - 1]).input_ids)
        assert trace.cache.computed == 0
        assert len(trace.row_blocks) < row_blocks.FAN + 1
    assert merged, "FAN small blocks were computed again as one"
    assert_grown_equals_recomputed(model, trace, _every_layer(model))


@pytest.mark.parametrize("prompt", [BASE, "the"])     # (a short prompt merges with the steps)
def test_generation_and_undo_grow_and_cut_the_layers(model, prompt):
    trace = model.trace(prompt, detail_layers=_every_layer(model))
    shown = model.config.n_layer - 1
    trace.detail(shown)                       # read last: the layer on screen, grown by each step
    steps = []
    for token in model.encode(" ".join(WORDS)).input_ids[1:10]:
        trace = model.extend(trace, [int(token)])
        steps.append(trace.computed_rows)
        assert trace.cache.computed == 0
    assert steps[0] == 1 and max(steps) > 1, steps       # a step, then blocks merged once
    assert_grown_equals_recomputed(model, trace, (shown,))
    back = model.truncate(trace, trace.n_seq - 3)
    assert back.computed_rows == 0 and back.cache.computed == 0
    assert_grown_equals_recomputed(model, back, (shown,))


def test_a_block_cut_short_is_computed_at_its_whole_length():
    # rows 0..5 of a block computed over 9 rows: computed again over 9 (zero rows after 5)
    model = load_model(FIXTURES / "llama_tiny")
    long = model.trace(BASE)
    short = model.truncate(long, 5, carry=False)
    assert short.row_blocks == ((0, long.n_seq),)
    for layer in _every_layer(model):
        detail = short.detail(layer)
        cut = row_blocks.cut_detail(long.detail(layer), 5)     # (scores: derived, not cut)
        passes = _passes_arrays(model, short, layer)
        for name, value in detail.items():
            assert np.array_equal(value, passes[name] if cut[name] is None else cut[name]), name


def test_where_a_pass_starts():
    start = row_blocks.pass_start
    assert start(((0, 1000),), 1000, 1001) == 1000                    # typing at the end
    assert start(((0, 1000),), 500, 1000) == 500                      # an edit in the middle
    assert start(((0, 1000),), 999, 999) == 999                       # a deletion computes nothing
    seven = ((0, 1000),) + tuple((i, i + 1) for i in range(1000, 1007))
    assert start(seven, 1007, 1008) == 1000, "FAN one-row blocks are computed as one"
    assert start(seven[:-1], 1006, 1007) == 1006
    assert start(((0, 1000),), 100, 101) == 0, "a block cut to a tenth is computed again"
    assert start(((0, 100),), 40, 41) == 40, "unless its padding is small"


def _passes_arrays(model, trace, layer):
    # every array of the layer as its passes computed it, block by block (nothing derived)
    return row_blocks.layer_detail(model.params, model.config, layer, trace.residual["layer_in"][layer],
                                   trace.kv_cache, trace.row_blocks, trace.n_seq)


def test_a_layer_made_by_several_passes_derives_their_scores_bit_for_bit(model):
    # kept lean (one n_head·n² array: the weights) and derived block by block: whole, per head,
    # per row and kept per head, the derived arrays are what the passes computed
    trace = model.trace(BASE, detail_layers=(0,))
    for text in EDITS[:5] + [EDITS[5] + " river"]:
        trace = model.retrace(trace, model.encode(text), text, detail_layers=(0,))
        assert len(trace.row_blocks) > 1
        for layer in _every_layer(model):
            detail = trace.detail(layer)
            passes = _passes_arrays(model, trace, layer)
            derived = [name for name in passes if name in detail and name not in detail.kept]
            assert {"scores_raw", "scores"} <= set(derived), "only the weights kept of n² arrays"
            per_head = detail.headwise()
            assert per_head.per_head and "attn_weights" not in per_head.kept
            assert list(detail) == list(passes)
            for name in passes:         # kept, derived (scores, rotated q/k, repeated k/v) alike
                assert np.array_equal(detail[name], passes[name]), f"{text!r} layer {layer} {name}"
                assert np.array_equal(per_head[name], passes[name]), f"{text!r} layer {layer} {name} per head"
                if passes[name].shape[:1] != (model.config.n_head,) or passes[name].ndim != 3:
                    continue                                  # not a per-head array
                for head in range(model.config.n_head):
                    for source in (detail, per_head):
                        assert np.array_equal(source.head(name, head), passes[name][head]), (name, head)
                row = trace.n_seq // 2
                assert np.array_equal(detail.rows(name, row), passes[name][:, row]), name
            assert detail.nbytes() < sum({id(v): v.nbytes for v in passes.values()}.values())


def test_a_grown_layer_over_the_budget_is_kept_per_head(model):
    # an edit grows or cuts the layer on screen; over the budget alone it is kept per head, as
    # a layer of one pass is: the cache stays within the budget
    longer = BASE + " and green"
    whole = lambda text: model.trace(text, detail_layers=(0,)).detail(0).nbytes()   # noqa: E731
    budget = whole(longer) - 1
    trace = model.trace(BASE, detail_budget=budget, detail_layers=(0,))
    assert not trace.detail(0).per_head
    for text in (longer, BASE + " and", longer):         # typed at the end, deleted, typed
        trace = model.retrace(trace, model.encode(text), text, detail_layers=(0,))
        assert trace.cache.computed == 0 and len(trace.row_blocks) > 1, "grown or cut, not computed"
        # over the budget whole: per head (a per-head layer cut shorter stays per head: its
        # whole weights are never made, only each head's when read)
        assert trace.detail(0).per_head == (whole(text) > budget or text != longer), text
        assert trace.cache.nbytes() <= budget
        passes = _passes_arrays(model, trace, 0)
        for head in range(model.config.n_head):
            assert np.array_equal(trace.head_array("attn_weights", 0, head), passes["attn_weights"][head])
