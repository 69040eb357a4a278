"""Invariants of the one forward pass on tiny random models with fixed seeds: the shape of
every trace array, softmax rows, the causal mask, LayerNorm statistics, traced == untraced
bit for bit, read-only arrays, float32 throughout."""
import numpy as np
import pytest

from tests.builders import random_params, tiny_config, tokenizer_for, wrap
from transformer_stepper import Model
from transformer_stepper.core.model import ops

KINDS = ["bert", "gpt2", "sinusoidal"]
TEXT = {"bert": "The bank of the river, and the money.", "gpt2": "the bank of the river",
        "sinusoidal": "she sat by the river bank"}
PER_LAYER_D = ("layer_in", "attn_in", "heads_concat", "attn_out", "attn_residual", "ln_1_in",
               "ln_1_normalized", "ln_1_out", "ln_2_in", "ln_2_normalized", "ln_2_out", "mlp_in",
               "mlp_out", "mlp_residual", "layer_out")


def make_model(kind: str, seed: int = 0, **changes) -> Model:
    config = tiny_config(kind, **changes)
    return Model(config, random_params(config, seed), wrap(tokenizer_for(kind)), source=f"tiny-{kind}")


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


@pytest.fixture
def model(kind):
    return make_model(kind)


@pytest.fixture
def trace(model, kind):
    return model.trace(TEXT[kind])


def expected_shapes(kind: str, config, n: int) -> dict[str, tuple]:
    L, H, d, f, V = config.n_layer, config.n_head, config.d_model, config.d_ff, config.n_vocab
    dh = config.d_head
    shapes = {name: (n, d) for name in ("token_embeddings", "position_embeddings", "embedding_sum",
                                         "embedding_output")}
    shapes.update({name: (L, n, d) for name in PER_LAYER_D})
    shapes.update({"q": (L, H, n, dh), "k": (L, H, n, dh), "v": (L, H, n, dh), "head_outputs": (L, H, n, dh),
                   "scores_raw": (L, H, n, n), "scores": (L, H, n, n), "attn_weights": (L, H, n, n),
                   "mlp_pre_act": (L, n, f), "mlp_act": (L, n, f), "token_type_ids": (n,),
                   "hidden_states": (L + 1, n, d), "logits": (n, V)})
    if kind == "bert":
        shapes.update({"token_type_embeddings": (n, d), "embedding_ln_normalized": (n, d),
                       "head_transform": (n, d)})
    if kind == "gpt2":
        shapes.update({"final_ln_normalized": (n, d), "final_ln_out": (n, d)})
    return shapes


def test_shape_of_every_trace_array(kind, model, trace):
    n = trace.n_seq
    assert n > 3
    expected = expected_shapes(kind, model.config, n)
    assert set(trace.names()) == set(expected)
    for name, shape in expected.items():
        assert trace[name].shape == shape, name
    assert trace.input_ids.shape == (n,) and trace.offsets.shape == (n, 2)
    assert trace.special_tokens_mask.shape == (n,) and len(trace.tokens) == n
    assert trace.attentions is trace["attn_weights"]
    assert (trace.mask is None) == (kind != "gpt2")


def test_softmax_rows_sum_to_one(trace):
    weights = trace.attentions
    assert np.all(weights >= 0) and np.all(weights <= 1)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)


def test_causal_upper_triangle_is_exactly_zero(kind, trace):
    n = trace.n_seq
    upper = np.triu(np.ones((n, n), bool), k=1)
    if kind == "gpt2":
        assert np.all(trace.attentions[..., upper] == 0.0)
        assert np.all(trace["scores"][..., upper] == -np.inf)
        assert np.all(np.isfinite(trace["scores"][..., ~upper]))
        np.testing.assert_array_equal(trace.mask, upper)
        # the first token can only look at itself
        np.testing.assert_array_equal(trace.attentions[:, :, 0, 0], 1.0)
    else:
        assert np.all(np.isfinite(trace["scores"])) and np.all(trace.attentions > 0)


def test_layer_norm_normalized_parts_have_mean_zero_and_variance_one(trace):
    names = [n for n in trace.names() if n.endswith("_normalized")]
    assert {"ln_1_normalized", "ln_2_normalized"} <= set(names)
    for name in names:
        x = trace[name].astype(np.float64)
        np.testing.assert_allclose(x.mean(-1), 0, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(x.var(-1), 1, atol=1e-4, err_msg=name)


def test_traced_and_untraced_outputs_are_identical(kind, model, trace):
    untraced = model(TEXT[kind])
    final = trace["final_ln_out"] if kind == "gpt2" else trace["layer_out"][-1]
    assert untraced["last_hidden_state"].tobytes() == final.tobytes()
    assert untraced["logits"].tobytes() == trace.logits.tobytes()
    assert trace.hidden_states[-1].tobytes() == final.tobytes()


def test_every_trace_array_is_read_only(model, trace):
    arrays = [trace[name] for name in trace.names()]
    arrays += [trace.input_ids, trace.offsets, trace.special_tokens_mask, trace.attentions]
    for value in arrays:
        assert not value.flags.writeable
    with pytest.raises(ValueError):
        trace["q"][0, 0, 0, 0] = 1.0
    with pytest.raises(ValueError):
        trace.hidden_states[0, 0, 0] = 1.0
    assert all(not p.flags.writeable for p in model.params.values())


def test_everything_is_float32(trace):
    for name, value in trace.to_dict().items():
        if value.dtype.kind in "fc":
            assert value.dtype == np.float32, f"{name} is {value.dtype}"
    assert trace.input_ids.dtype == np.int64 and trace["token_type_ids"].dtype == np.int64


def test_float64_params_do_not_creep_into_the_trace(kind):
    config = tiny_config(kind)
    params = {k: v.astype(np.float64) for k, v in random_params(config).items()}
    model = Model(config, params, wrap(tokenizer_for(kind)))
    float32_trace = make_model(kind).trace(TEXT[kind])
    trace = model.trace(TEXT[kind])
    assert all(v.dtype == np.float32 for v in trace.to_dict().values() if v.dtype.kind == "f")
    assert trace.hidden_states.tobytes() == float32_trace.hidden_states.tobytes()


def test_fixed_seed_is_reproducible_and_seeds_differ(kind):
    a, b = make_model(kind, seed=7).trace(TEXT[kind]), make_model(kind, seed=7).trace(TEXT[kind])
    c = make_model(kind, seed=8).trace(TEXT[kind])
    assert a.hidden_states.tobytes() == b.hidden_states.tobytes()
    assert a.hidden_states.tobytes() != c.hidden_states.tobytes()


def test_stages_connect(kind, model, trace):
    """Each recorded stage is computed from the previous ones exactly as docs/architecture.md says."""
    p, c = model.params, model.config
    np.testing.assert_array_equal(trace["token_embeddings"], p["wte"][trace.input_ids])  # row selection
    if kind == "sinusoidal":
        np.testing.assert_array_equal(trace["position_embeddings"], ops.sinusoid_table(trace.n_seq, c.d_model))
    else:
        np.testing.assert_array_equal(trace["position_embeddings"], p["wpe"][:trace.n_seq])
    np.testing.assert_array_equal(trace.hidden_states[0], trace["embedding_output"])
    np.testing.assert_array_equal(trace["attn_residual"], trace["layer_in"] + trace["attn_out"])
    for i in range(c.n_layer):
        np.testing.assert_array_equal(trace["ln_1_out"][i],
                                      trace["ln_1_normalized"][i] * p[f"h.{i}.ln_1.g"] + p[f"h.{i}.ln_1.b"])
        np.testing.assert_array_equal(trace["heads_concat"][i], ops.merge_heads(trace["head_outputs"][i]))
        if i + 1 < c.n_layer:
            np.testing.assert_array_equal(trace["layer_out"][i], trace["layer_in"][i + 1])
    np.testing.assert_array_equal(trace["q"][0], ops.split_heads(
        ops.linear(trace["attn_in"][0], p["h.0.attn.q.w"], p["h.0.attn.q.b"]), c.n_head))
    if c.norm == "pre":
        np.testing.assert_array_equal(trace["attn_in"], trace["ln_1_out"])
        np.testing.assert_array_equal(trace["mlp_residual"], trace["attn_residual"] + trace["mlp_out"])
    else:
        np.testing.assert_array_equal(trace["attn_in"], trace["layer_in"])
        np.testing.assert_array_equal(trace["mlp_residual"], trace["ln_1_out"] + trace["mlp_out"])
        np.testing.assert_array_equal(trace["layer_out"], trace["ln_2_out"])


def test_longest_sequence_the_context_allows(kind):
    model = make_model(kind, n_ctx=6)
    trace = model.trace("the bank of the river and the money and the river bank")
    assert trace.truncated and trace.n_seq == 6
    np.testing.assert_allclose(trace.attentions.sum(-1), 1.0, atol=1e-6)


def test_single_token(kind):
    model = make_model(kind)
    encoded = model.encode("x")
    trace = model.trace("x")
    assert trace.n_seq == len(encoded.input_ids) >= 1
    assert np.all(np.isfinite(trace.hidden_states))


def test_corrupt_weights_give_inf_or_nan_in_the_trace_not_numpy_warnings(kind):
    # pytest turns warnings into errors: a RuntimeWarning from inside an op would fail here
    config = tiny_config(kind)
    params = random_params(config)
    params["wte"][:, 3] = np.inf
    params["h.0.mlp.fc.w"][0, 0] = np.nan
    model = Model(config, params, wrap(tokenizer_for(kind)))
    trace = model.trace(TEXT[kind])
    assert not np.isfinite(trace.hidden_states).all()
    assert not np.isfinite(model(TEXT[kind])["last_hidden_state"]).all()
