"""Generation: an incremental step equals re-tracing the whole extended text; sampling with a
seed is reproducible; the cut-offs keep what they say; the logit lens at the last layer is the
model's logits; greedy generation equals Hugging Face's generate (committed references)."""
import numpy as np
import pytest

from tests.core.test_architectures import make as make_llama
from tests.core.test_forward import make_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.trace.generate import (
    Sampling,
    distribution,
    generate,
    lens,
    lens_logits,
    logit_lens,
    step)
from transformer_stepper.core.model.ops import softmax
from transformer_stepper.core.model.tokenize import Encoded

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
        full = lens(model, trace, top=3)
        np.testing.assert_array_equal(full.final_ids, trace.logits.argmax(-1))
        # the final prediction's probability at every state, from the lens logits directly
        for index in (0, model.config.n_layer):
            p = softmax(lens_logits(model, trace, index).astype(np.float64))
            np.testing.assert_allclose(full.final_probabilities[index],
                                       p[np.arange(trace.n_seq), full.final_ids], atol=1e-6)
        assert lens(model, trace, top=2) is full, "kept with the trace"


def test_steps_one_at_a_time_give_the_text_of_steps_at_once():
    """A sampled token depends on the seed and its position, not on how steps were grouped:
    undo and redo, or one at a time, give the same text as n at once."""
    model = make_model("gpt2")
    trace = model.trace(TEXT)
    sampling = Sampling(temperature=2.0, seed=11)
    at_once = generate(model, trace, 6, sampling)[-1]
    one_by_one = trace
    for _ in range(6):
        one_by_one = step(model, one_by_one, sampling)
    np.testing.assert_array_equal(at_once.input_ids, one_by_one.input_ids)
    other_seed = generate(model, trace, 6, Sampling(temperature=2.0, seed=12))[-1]
    assert not np.array_equal(at_once.input_ids, other_seed.input_ids)
    chosen = step(model, trace, token=5)             # the user's own choice
    assert chosen.input_ids[-1] == 5 and chosen.generated[-1]


@pytest.mark.parametrize("make", [lambda: make_model("gpt2"), lambda: make_llama(sliding_window=4)])
def test_truncate_is_the_trace_of_the_first_tokens(make):
    """Undo: cutting a generated trace back equals the trace it was extended from, and
    extending the cut trace again equals the longer one."""
    model = make()
    prompt = model.trace(TEXT)
    longer = generate(model, prompt, 4, Sampling(temperature=1.0, seed=1))[-1]
    back = model.truncate(longer, prompt.n_seq + 1)
    one_step = generate(model, prompt, 1, Sampling(temperature=1.0, seed=1))[-1]
    assert back.text == one_step.text and back.tokens == one_step.tokens
    np.testing.assert_array_equal(back.input_ids, one_step.input_ids)
    np.testing.assert_allclose(back.hidden_states, one_step.hidden_states, atol=1e-6)
    np.testing.assert_allclose(back.layer("attn_weights", 1), one_step.layer("attn_weights", 1), atol=1e-6)
    assert back.kv_cache.n_seq == back.n_seq and back.computed_rows == 0
    assert list(back.generated) == [False] * prompt.n_seq + [True]
    to_prompt = model.truncate(longer, prompt.n_seq)
    assert to_prompt.text == prompt.text and not to_prompt.generated.any()
    again = model.extend(back, longer.input_ids[back.n_seq:])
    np.testing.assert_allclose(again.logits, longer.logits, atol=1e-4)
    with pytest.raises(ModelError, match="cannot cut"):
        model.truncate(longer, 0)


def test_the_lens_in_blocks_equals_the_lens_at_once(monkeypatch):
    """A long text's lens is computed a block of positions at a time: the same numbers."""
    from transformer_stepper.core.trace import lens_blocks

    model = make_model("gpt2")
    whole = lens(model, model.trace(TEXT), top=4)
    monkeypatch.setattr(lens_blocks, "LENS_BLOCK", 3)
    blocks = lens(model, model.trace(TEXT), top=4)
    np.testing.assert_array_equal(blocks.ids, whole.ids)
    # BLAS may sum a 3-row product in another order than a whole one (it does on some CPUs):
    # a few float32 roundings, not a different computation
    np.testing.assert_allclose(blocks.probabilities, whole.probabilities, atol=2e-6)
    np.testing.assert_allclose(blocks.final_probabilities, whole.final_probabilities, atol=2e-6)
