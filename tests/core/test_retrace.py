"""Re-tracing an edited text from the previous trace (Model.retrace): a causal model computes
only the positions after the first changed token, and the result equals tracing the edited
text from scratch; an encoder, or a trace of an intervened pass, is traced from scratch."""
import numpy as np
import pytest

from tests.builders import assert_close_trace
from tests.core.test_architectures import make as make_llama
from tests.core.test_forward import make_model
from transformer_stepper.core.model.interventions import AblateHead

TEXT = "the bank of the river"

DECODERS = [lambda: make_model("gpt2"), lambda: make_llama(sliding_window=4),
            lambda: make_llama(tied_head=True, n_kv_head=0)]


@pytest.mark.parametrize("make", DECODERS)
@pytest.mark.parametrize("edited", ["the bank of the river bank", "the bank of", "the bank of the bank",
                                    TEXT, "river of the bank"])
def test_a_retrace_equals_tracing_the_edited_text(make, edited):
    model = make()
    previous = model.trace(TEXT, detail_layers=(1,))
    encoded = model.encode(edited)
    shared = model.shared_rows(previous, encoded)
    expected_shared = 0
    while (expected_shared < min(len(encoded.input_ids), previous.n_seq)
           and encoded.input_ids[expected_shared] == previous.input_ids[expected_shared]):
        expected_shared += 1
    assert shared == expected_shared
    trace = model.retrace(previous, encoded, edited, detail_layers=(0,))
    assert trace.computed_rows == len(encoded.input_ids) - shared
    assert trace.is_ready(0), "the detail asked for is computed before it returns"
    fresh = model.trace_encoded(encoded, edited)
    assert trace.text == edited and trace.tokens == fresh.tokens
    np.testing.assert_array_equal(trace.input_ids, fresh.input_ids)
    np.testing.assert_array_equal(trace.offsets, fresh.offsets)
    assert_close_trace(trace, fresh)
    np.testing.assert_allclose(trace.logits, fresh.logits, atol=1e-4, rtol=1e-5)
    assert trace.kv_cache.n_seq == trace.n_seq
    for layer in range(model.config.n_layer):
        np.testing.assert_allclose(trace.kv_cache.keys[layer], fresh.kv_cache.keys[layer], atol=1e-5)
    assert previous.n_seq == len(model.encode(TEXT).input_ids), "the previous trace is left as it was"


def test_appending_computes_only_the_new_tokens_and_deleting_computes_nothing():
    model = make_model("gpt2")
    previous = model.trace(TEXT)
    longer = model.retrace(previous, model.encode(TEXT + " bank"), TEXT + " bank")
    assert longer.computed_rows == longer.n_seq - previous.n_seq >= 1
    # the shared rows are previous's own numbers
    np.testing.assert_array_equal(longer.hidden_states[:, :previous.n_seq], previous.hidden_states)
    shorter = model.retrace(longer, model.encode("the bank"), "the bank")
    assert shorter.computed_rows == 0
    np.testing.assert_array_equal(shorter.hidden_states, longer.hidden_states[:, :shorter.n_seq])
    same = model.retrace(previous, model.encode(TEXT), TEXT)
    assert same.computed_rows == 0 and same.hidden_states is not None
    for layer in previous.cache.layers():
        assert same.is_ready(layer), "the same tokens keep their computed layers"


def test_an_encoder_or_an_intervened_trace_is_traced_from_scratch():
    bert = make_model("bert")
    previous = bert.trace(TEXT)
    encoded = bert.encode(TEXT + " bank")
    assert bert.shared_rows(previous, encoded) == 0, "every position of an encoder sees every other"
    trace = bert.retrace(previous, encoded, TEXT + " bank")
    assert trace.computed_rows == trace.n_seq
    assert_close_trace(trace, bert.trace_encoded(encoded, TEXT + " bank"), atol=0)

    gpt2 = make_model("gpt2")
    intervened = gpt2.trace(TEXT, interventions=(AblateHead(layer=0, head=0),))
    assert gpt2.shared_rows(intervened, gpt2.encode(TEXT + " bank")) == 0
    other = make_model("gpt2")                       # another model's trace shares nothing
    assert gpt2.shared_rows(other.trace(TEXT), gpt2.encode(TEXT)) == 0
    assert gpt2.shared_rows(None, gpt2.encode(TEXT)) == 0
