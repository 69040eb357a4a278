"""The lazy trace: a layer's detail, computed on demand from the stored residual stream, is
bit-identical to recording it during one eager pass; evicted layers recompute identically;
the cache keeps within its byte budget."""
import numpy as np
import pytest

from tests.core.test_forward import KINDS as BASE_KINDS
from tests.core.test_forward import TEXT as BASE_TEXT
from tests.core.test_forward import make_model
from transformer_stepper.core.model.forward import forward
from transformer_stepper.core.model.layer_context import context
from transformer_stepper.core.trace.layer_cache import LayerCache
from transformer_stepper.core.trace.recorder import Recorder


KINDS = [*BASE_KINDS, "llama"]                 # llama: rotary, RMSNorm, SwiGLU, GQA
TEXT = {**BASE_TEXT, "llama": "the bank of the river"}


def eager_recording(model, text):
    """Every intermediate of every layer, recorded during one pass (the pre-lazy design)."""
    encoded = model.encode(text)
    ids = np.asarray(encoded.input_ids, dtype=np.int64)
    recorder = Recorder()
    forward(model.params, model.config, ids, np.asarray(encoded.token_type_ids), recorder,
            ctx=context(model.config, len(ids)))
    return recorder.finish()


@pytest.mark.parametrize("kind", KINDS)
def test_lazy_detail_is_bit_identical_to_eager_recording(kind):
    model = make_model(kind)
    arrays, per_layer = eager_recording(model, TEXT[kind])
    trace = model.trace(TEXT[kind])
    trace.cache.clear()               # (the pass recorded the layers that fit: computed here)
    assert set(trace.layer_names()) == set(per_layer)
    for layer in reversed(range(model.config.n_layer)):   # any order
        for name, values in per_layer.items():
            np.testing.assert_array_equal(trace.layer(name, layer), values[layer], err_msg=name)
            assert trace.layer(name, layer).dtype == values[layer].dtype
    for name, value in arrays.items():
        np.testing.assert_array_equal(trace[name], value, err_msg=name)
    np.testing.assert_array_equal(trace["attn_weights"], np.stack(per_layer["attn_weights"]))


@pytest.mark.parametrize("kind", KINDS)
def test_evicted_layer_recomputes_identically_within_a_tiny_budget(kind):
    model = make_model(kind, n_layer=3)
    trace = model.trace(TEXT[kind], detail_budget=1)       # one layer at a time
    first = {name: trace.layer(name, 0).copy() for name in trace.layer_names()}
    trace.layer("q", 1)
    trace.layer("q", 2)
    assert trace.cache.layers() == [2], "a 1-byte budget keeps only the layer just computed"
    computed = trace.cache.computed
    for name, value in first.items():
        np.testing.assert_array_equal(trace.layer(name, 0), value, err_msg=name)
    assert trace.cache.computed == computed + 1, "layer 0 was evicted and computed again"


def test_a_layer_computed_in_one_thread_does_not_hold_up_readers_of_another():
    """The app prepares the next layer in a worker while the GUI thread reads the shown one:
    the reader must not wait for that computation; a second asker of the same layer waits
    for it and gets its result (computed once)."""
    import threading

    started, release = threading.Event(), threading.Event()

    def compute(layer: int) -> dict:
        if layer == 1:
            started.set()
            release.wait(10)
        return {"x": np.full(4, layer, np.float32)}

    cache = LayerCache(compute, budget=1 << 20)
    ready = cache.get(0)
    results = []
    workers = [threading.Thread(target=lambda: results.append(cache.get(1))) for _ in range(2)]
    workers[0].start()
    assert started.wait(10)
    workers[1].start()                         # asks for the layer under way: waits
    try:
        # while layer 1 is computed, layer 0, what is cached and its size answer at once
        reader = threading.Thread(target=lambda: results.append(
            (cache.get(0), cache.has(1), cache.layers(), cache.nbytes())))
        reader.start()
        reader.join(2)
        assert not reader.is_alive(), "a reader waited for another layer's computation"
        assert results == [(ready, False, [0], 16)]
    finally:
        release.set()
    for worker in workers:
        worker.join(10)
    assert results[1] is results[2] and results[1]["x"][0] == 1
    assert cache.computed == 2                 # layers 0 and 1, each once


def test_a_failed_computation_is_not_cached_and_a_waiting_asker_tries_again():
    import threading

    calls, started, release = [], threading.Event(), threading.Event()

    def compute(layer: int) -> dict:
        calls.append(layer)
        if len(calls) == 1:
            started.set()
            release.wait(10)
            raise MemoryError("no room")
        return {"x": np.zeros(2, np.float32)}

    cache = LayerCache(compute, budget=1 << 20)
    errors, results = [], []

    def first() -> None:
        try:
            cache.get(3)
        except MemoryError as error:
            errors.append(error)

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(10)
    waiter = threading.Thread(target=lambda: results.append(cache.get(3)))
    waiter.start()
    release.set()
    thread.join(10)
    waiter.join(10)
    assert len(errors) == 1 and len(results) == 1 and calls == [3, 3]
    assert cache.layers() == [3]


def test_budget_bounds_the_cached_bytes():
    model = make_model("gpt2", n_layer=4)
    one_layer = model.trace(TEXT["gpt2"], detail_budget=0)
    one_layer.prepare(0)
    size = one_layer.cache.nbytes()
    trace = model.trace(TEXT["gpt2"], detail_budget=int(size * 2.5))
    for i in range(4):
        trace.prepare(i)
        assert trace.cache.nbytes() <= size * 2.5
    assert trace.cache.layers() == [2, 3]
    # the detail is not kept alive by the trace beyond the budget
    assert trace.nbytes() < one_layer.nbytes() + 3 * size


def test_hidden_states_need_no_layer_detail():
    model = make_model("gpt2")
    trace = model.trace(TEXT["gpt2"], detail_budget=0)    # the pass records no layer's detail
    hidden = trace.hidden_states
    assert not trace.cache.layers()
    arrays, per_layer = eager_recording(model, TEXT["gpt2"])
    np.testing.assert_array_equal(hidden[1:-1], np.stack(per_layer["layer_out"][:-1]))
    np.testing.assert_array_equal(hidden[-1], arrays["final_ln_out"])


def test_detail_arrays_are_read_only_and_layer_out_of_range_is_named():
    trace = make_model("bert").trace(TEXT["bert"])
    with pytest.raises(ValueError):
        trace.layer("scores", 0)[0, 0, 0] = 1.0
    with pytest.raises(IndexError, match="layer 9"):
        trace.layer("q", 9)
    with pytest.raises(KeyError, match="no_such"):
        trace.layer("no_such", 0)


@pytest.mark.parametrize("kind", KINDS)
def test_layer_recorded_by_the_pass_equals_the_layer_computed_later(kind):
    model = make_model(kind)
    seeded = model.trace(TEXT[kind], detail_layers=(1,), detail_budget=0)
    assert seeded.cache.layers() == [1] and seeded.cache.computed == 0
    later = model.trace(TEXT[kind])
    later.cache.clear()
    for name in later.layer_names():
        np.testing.assert_array_equal(seeded.layer(name, 1), later.layer(name, 1), err_msg=name)
    assert seeded.cache.computed == 0, "layer 1 came from the pass, not a second computation"
    with pytest.raises(ValueError):
        seeded.layer("attn_weights", 1)[0, 0, 0] = 0.5


@pytest.mark.parametrize("kind", [k for k in KINDS if make_model(k).config.lm_head])
def test_logits_are_computed_when_asked_and_only_the_rows_asked(kind):
    """The vocabulary product is left out of the pass: a trace holds no [n_seq, n_vocab]
    array until `logits` is read; `logits_at` gives some rows without making it."""
    from transformer_stepper.core.trace.generate import predictions

    model = make_model(kind)
    trace = model.trace(TEXT[kind])
    n, n_vocab = trace.n_seq, model.config.n_vocab
    before = trace.nbytes()
    eager = model(TEXT[kind])["logits"]
    np.testing.assert_allclose(trace.logits_at(-1), eager[-1], atol=1e-5)
    np.testing.assert_allclose(trace.logits_at(slice(1, 3)), eager[1:3], atol=1e-5)
    top = predictions(trace, 3)
    assert trace.nbytes() == before, "rows and top tokens keep no logits array"
    expected = np.argsort(-eager, axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(top.ids, expected)
    p = np.exp(eager - eager.max(-1, keepdims=True))
    np.testing.assert_allclose(top.probabilities, np.take_along_axis(p / p.sum(-1, keepdims=True), expected, -1),
                               atol=1e-6)
    np.testing.assert_array_equal(trace.logits, eager)    # the whole product: the same bits
    assert trace.nbytes() == before + n * n_vocab * 4
    assert "logits" in trace and "logits" in trace.names()
    with pytest.raises(IndexError, match="outside"):
        trace.logits_at(n)


def test_an_encoder_without_head_has_no_logits():
    model = make_model("bert")
    trace = model.trace(TEXT["bert"])
    if model.config.lm_head:
        pytest.skip("the fixture has a head")
    assert trace.logits is None and "logits" not in trace
    with pytest.raises(KeyError, match="no output head"):
        trace.logits_at(0)


@pytest.mark.parametrize("kind", [k for k in KINDS if make_model(k).config.lm_head])
def test_the_change_of_the_logits_is_one_product_of_the_change_of_the_head_input(kind):
    from transformer_stepper.core.model.interventions import SwapEmbedding

    model = make_model(kind)
    clean = model.trace(TEXT[kind])
    other = (int(clean.input_ids[1]) + 1) % model.config.n_vocab     # not the token already there
    swapped = model.trace(TEXT[kind], interventions=[SwapEmbedding(position=1, token_id=other)])
    change = clean.logits_change_at(swapped, slice(0, clean.n_seq))
    np.testing.assert_allclose(change, swapped.logits - clean.logits, atol=2e-5)
    assert np.abs(change).max() > 1e-3                     # the swap did change them
    with pytest.raises(ValueError, match="different models"):
        clean.logits_change_at(make_model("llama").trace("the bank"), slice(0, 2))


def test_a_layer_under_way_blocks_neither_readiness_nor_other_layers_and_is_computed_once():
    import threading

    from transformer_stepper.core.trace.layer_cache import LayerCache

    started, release = threading.Event(), threading.Event()
    calls = []

    def compute(layer):
        calls.append(layer)
        if layer == 0:
            started.set()
            assert release.wait(10)
        return {"x": np.full(4, layer, np.float32)}

    cache = LayerCache(compute, budget=1 << 20)
    results = []
    workers = [threading.Thread(target=lambda: results.append(cache.get(0))) for _ in range(2)]
    workers[0].start()
    assert started.wait(10)
    workers[1].start()                  # asks for the same layer while it is computed
    assert cache.has(0) is False, "readiness is answered while layer 0 computes"
    assert cache.get(1)["x"][0] == 1, "another layer is computed meanwhile"
    release.set()
    for worker in workers:
        worker.join(10)
    assert calls == [0, 1], "layer 0 computed once, the second asker waited for it"
    assert len(results) == 2 and results[0] is results[1]
    assert cache.has(0) and cache.computed == 2


@pytest.mark.parametrize("kind", KINDS)
def test_the_pass_records_every_layer_that_fits_the_budget_bit_identical_to_computing_it(kind):
    """The first pass records the detail of every layer that fits (visiting each layer then
    computes nothing); each recorded layer equals the one computed from its stored input."""
    model = make_model(kind, n_layer=4)
    trace = model.trace(TEXT[kind])
    n_layer = model.config.n_layer
    assert trace.cache.layers() == list(range(n_layer)) and trace.cache.computed == 0
    for layer in range(n_layer):
        computed = trace.cache._compute(layer)
        recorded = trace.detail(layer)
        assert set(recorded) == set(computed)
        for name, value in computed.items():
            assert recorded[name].dtype == value.dtype
            np.testing.assert_array_equal(recorded[name], value, err_msg=f"{name}, layer {layer}")
    assert trace.cache.computed == 0


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_recording_stops_where_the_budget_is_spent_and_keeps_the_layer_asked_for(kind):
    model = make_model(kind, n_layer=4)
    one = model.trace(TEXT[kind])
    layer_bytes = one.cache.nbytes() // 4
    for fits in (1, 2, 3):
        trace = model.trace(TEXT[kind], detail_budget=fits * layer_bytes + layer_bytes // 2,
                            detail_layers=(3,))
        assert trace.cache.layers() == [*range(fits - 1), 3]      # room kept for the layer asked for
        assert trace.cache.nbytes() <= trace.cache.budget and trace.cache.computed == 0
    assert model.trace(TEXT[kind], detail_budget=layer_bytes - 1).cache.layers() == []


def test_a_retrace_records_only_what_the_previous_trace_leaves_of_the_budget():
    """While the app traces an edited text the trace on screen is alive: the two traces'
    recorded detail stays within one budget (plus the layer asked for)."""
    model = make_model("bert", n_layer=4)          # an encoder: every edit is a whole pass
    probe = model.trace(TEXT["bert"])
    layer_bytes = probe.cache.nbytes() // 4
    budget = 3 * layer_bytes + layer_bytes // 2
    previous = model.trace(TEXT["bert"], detail_budget=budget)
    assert previous.cache.layers() == [0, 1, 2]
    edited = model.retrace(previous, model.encode(TEXT["bert"] + " again"), detail_layers=(0,))
    assert edited.cache.layers() == [0]
    assert edited.cache.budget == budget           # the budget itself is previous's
    fresh = model.retrace(None, model.encode(TEXT["bert"]), detail_budget=budget)
    assert fresh.cache.layers() == [0, 1, 2]
