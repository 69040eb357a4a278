"""Generation: an incremental step equals re-tracing the whole extended text; sampling with a
seed is reproducible; the cut-offs keep what they say; the logit lens at the last layer is the
model's logits; greedy generation equals Hugging Face's generate (committed references)."""
import numpy as np
import pytest

from tests.core.test_architectures import make as make_llama
from tests.core.test_forward import make_model
from transformer_stepper.core.errors import ModelError
from transformer_stepper.core.generate import Sampling, distribution, generate, lens_logits, logit_lens
from transformer_stepper.core.tokenize import Encoded

TEXT = "the bank of the river"


def retrace(model, trace):
    """The extended token sequence traced from scratch (not from its text: pieces need not
    re-tokenize the same way)."""
    n = trace.n_seq
    return model.trace_encoded(Encoded(tokens=trace.tokens, input_ids=trace.input_ids,
                                       token_type_ids=np.zeros(n, np.int64), offsets=trace.offsets,
                                       special_tokens_mask=trace.special_tokens_mask, truncated=False))


@pytest.mark.parametrize("make", [lambda: make_model("gpt2"), lambda: make_llama(sliding_window=4),
                                  lambda: make_llama(tied_head=True, n_kv_head=0)])
def test_incremental_steps_equal_full_retraces(make):
    model = make()
    trace = model.trace(TEXT)
    steps = generate(model, trace, 6, Sampling(temperature=1.0, seed=3))
    assert [s.n_seq for s in steps] == list(range(trace.n_seq + 1, trace.n_seq + 7))
    last = steps[-1]
    assert last.computed_rows == 1 and list(last.generated) == [False] * trace.n_seq + [True] * 6
    full = retrace(model, last)
    np.testing.assert_allclose(last.hidden_states, full.hidden_states, atol=1e-5)
    np.testing.assert_allclose(last.logits, full.logits, atol=1e-4)
    for name in ("attn_weights", "q", "k", "v", "mlp_out"):
        np.testing.assert_allclose(last.layer(name, 1), full.layer(name, 1), atol=1e-5, err_msg=name)
    assert last.kv_cache.n_seq == last.n_seq
    assert trace.kv_cache.n_seq == trace.n_seq, "the prompt's trace is left as it was (undo)"


def test_sampling_with_a_seed_is_reproducible_and_greedy_is_argmax():
    model = make_model("gpt2")
    trace = model.trace(TEXT)
    a = generate(model, trace, 5, Sampling(temperature=1.5, seed=7))[-1].input_ids
    b = generate(model, trace, 5, Sampling(temperature=1.5, seed=7))[-1].input_ids
    np.testing.assert_array_equal(a, b)
    greedy = generate(model, trace, 1)[-1]
    assert greedy.input_ids[-1] == np.argmax(trace.logits[-1])


def test_top_k_and_top_p_keep_what_they_say():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    assert list(distribution(logits, Sampling(temperature=1, top_k=2)).kept) == [True, True, False, False]
    assert list(distribution(logits, Sampling(temperature=1, top_p=0.8)).kept) == [True, True, False, False]
    assert list(distribution(logits, Sampling(temperature=1, top_p=0.81)).kept) == [True, True, True, False]
    dist = distribution(logits, Sampling(temperature=1, top_k=2))
    np.testing.assert_allclose(dist.sampled, [0.625, 0.375, 0, 0], rtol=1e-6)
    with pytest.raises(ModelError, match="temperature"):
        Sampling(temperature=-1)
    with pytest.raises(ModelError, match="top-p"):
        Sampling(top_p=0)


def test_context_full_stops_generation_and_extend_says_why():
    model = make_model("gpt2")                       # n_ctx 24
    trace = model.trace(TEXT)
    steps = generate(model, trace, 100)
    assert steps[-1].n_seq == model.config.n_ctx
    with pytest.raises(ModelError, match="the context is full"):
        model.extend(steps[-1], [1])


def test_encoders_cannot_generate():
    model = make_model("bert")
    with pytest.raises(ModelError, match="causal model"):
        generate(model, model.trace(TEXT), 1)


def test_logit_lens_at_the_last_layer_is_the_model_logits():
    for model in (make_model("gpt2"), make_llama(), make_model("bert")):
        trace = model.trace(TEXT)
        np.testing.assert_allclose(lens_logits(model, trace, model.config.n_layer), trace.logits,
                                   rtol=1e-5, atol=1e-5)
        ids, probabilities = logit_lens(model, trace, top=3)
        assert ids.shape == (model.config.n_layer + 1, trace.n_seq, 3)
        np.testing.assert_array_equal(ids[-1, :, 0], trace.logits.argmax(-1))
        assert np.all(np.diff(probabilities, axis=-1) <= 0)
