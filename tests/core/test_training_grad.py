"""Every layer's backward pass against central finite differences, in float64, and the
training forward against the app's forward (core.model.forward.forward)."""
import numpy as np
import pytest

from transformer_stepper.core.model import ops
from transformer_stepper.core.model.config import ModelConfig
from transformer_stepper.core.model.forward import forward
from transformer_stepper.core.model.layer_context import context
from transformer_stepper.core.training import layers, network

STEP = 1e-6


def numeric_grad(loss_fn, array, n_entries=None, rng=None):
    """Central differences of the scalar loss_fn() w.r.t. `array` (perturbed in place);
    all entries, or n_entries random ones. Returns (flat indices, gradient values)."""
    flat = array.reshape(-1)
    if n_entries is None or n_entries >= flat.size:
        indices = np.arange(flat.size)
    else:
        indices = rng.choice(flat.size, size=n_entries, replace=False)
    values = []
    for i in indices:
        saved = flat[i]
        flat[i] = saved + STEP
        up = loss_fn()
        flat[i] = saved - STEP
        down = loss_fn()
        flat[i] = saved
        values.append((up - down) / (2 * STEP))
    return indices, np.array(values)


def assert_grad_close(analytic, loss_fn, array, n_entries=None, rng=None, name=""):
    indices, numeric = numeric_grad(loss_fn, array, n_entries, rng)
    got = np.asarray(analytic).reshape(-1)[indices]
    # central differences in float64 are good to ~1e-9 relative; the absolute floor covers
    # gradients that are exactly 0 (softmax ignores the key bias) where rounding leaves ~1e-9
    scale = max(float(np.abs(numeric).max()), 1.0)
    np.testing.assert_allclose(got, numeric, atol=1e-7 * scale, rtol=1e-5, err_msg=name)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_linear_backward(rng):
    x, w, b = rng.normal(size=(2, 3, 5)), rng.normal(size=(5, 4)), rng.normal(size=4)
    probe = rng.normal(size=(2, 3, 4))
    loss = lambda: float(np.sum(ops.linear(x, w, b) * probe))
    dx, dw, db = layers.linear_backward(x, w, probe)
    for analytic, array, name in ((dx, x, "x"), (dw, w, "w"), (db, b, "b")):
        assert_grad_close(analytic, loss, array, name=name)


def test_layer_norm_backward(rng):
    x = rng.normal(size=(2, 3, 6)) * 3 + 1
    g, b = rng.normal(size=6), rng.normal(size=6)
    probe = rng.normal(size=x.shape)
    loss = lambda: float(np.sum(layers.layer_norm_forward(x, g, b, 1e-5)[0] * probe))
    _, cache = layers.layer_norm_forward(x, g, b, 1e-5)
    dx, dg, db = layers.layer_norm_backward(probe, cache)
    for analytic, array, name in ((dx, x, "x"), (dg, g, "g"), (db, b, "b")):
        assert_grad_close(analytic, loss, array, name=name)


@pytest.mark.parametrize("name", ["relu", "gelu_tanh"])
def test_activation_backward(rng, name):
    x = rng.normal(size=(3, 7)) * 2
    x[np.abs(x) < 1e-3] = 0.5          # keep away from relu's kink
    probe = rng.normal(size=x.shape)
    loss = lambda: float(np.sum(layers.activation_forward(name, x) * probe))
    assert_grad_close(layers.activation_backward(name, x, probe), loss, x, name=name)


def test_unsupported_activation_is_refused():
    with pytest.raises(ValueError, match="gelu_erf"):
        layers.activation_backward("gelu_erf", np.zeros(3), np.zeros(3))


@pytest.mark.parametrize("causal", [True, False])
def test_attention_backward(rng, causal):
    batch, n_seq, d_model, n_head = 2, 5, 8, 2
    x = rng.normal(size=(batch, n_seq, d_model))
    w = {f"{p}.w": rng.normal(size=(d_model, d_model)) * 0.5 for p in "qkvo"}
    w.update({f"{p}.b": rng.normal(size=d_model) * 0.1 for p in "qkvo"})
    mask = ops.additive_mask(ops.causal_mask(n_seq)) if causal else None
    probe = rng.normal(size=(batch, n_seq, d_model))
    loss = lambda: float(np.sum(layers.attention_forward(x, w, n_head, mask)[0] * probe))
    _, cache = layers.attention_forward(x, w, n_head, mask)
    dx, grads = layers.attention_backward(probe, w, cache)
    assert_grad_close(dx, loss, x, name="x")
    for name, array in w.items():
        assert_grad_close(grads[name], loss, array, name=name)


def test_cross_entropy_backward_ignores_padding(rng):
    logits = rng.normal(size=(2, 4, 7))
    targets = rng.integers(0, 7, size=(2, 4))
    weights = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=np.float64)
    loss = lambda: layers.cross_entropy(logits, targets, weights)[0]
    value, dlogits = layers.cross_entropy(logits, targets, weights)
    assert_grad_close(dlogits, loss, logits, name="logits")
    assert np.all(dlogits[weights == 0] == 0)
    # the mean over the 5 weighted positions of -log softmax
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.sum(np.take_along_axis(log_probs, targets[..., None], -1)[..., 0] * weights) / 5
    assert value == pytest.approx(expected)


def tiny_config(**changes):
    base = dict(family="stepper", n_vocab=11, n_ctx=16, d_model=8, n_head=2, n_layer=2, d_ff=12,
                position="sinusoidal", causal=True, activation="relu", final_norm=True, lm_head=True)
    base.update(changes)
    return ModelConfig(**base)


def perturbed_params(config, rng, dtype):
    """init_params, with gains and biases moved off 1 and 0 so their gradients are generic."""
    params = network.init_params(config, rng)
    for name, value in params.items():
        spread = 0.3 if name.endswith((".g", ".b")) else 0.5 if name != "wte" else 0.0
        params[name] = (value + rng.normal(scale=spread, size=value.shape)).astype(dtype)
    return params


SCHEMES = [{}, {"position": "learned"}, {"position": "rotary"}, {"position": "none"},
           {"position": "concat", "d_position": 4},
           {"position": "concat", "d_position": 2, "tied_head": False}]


@pytest.mark.parametrize("changes", [{"activation": "gelu_tanh"}] + SCHEMES)
def test_whole_model_gradient(rng, changes):
    """Embedding + positions, every block, ln_f and the tied head, end to end."""
    config = tiny_config(**changes)
    params = perturbed_params(config, rng, np.float64)
    ids = rng.integers(0, config.n_vocab, size=(2, 6))
    targets = rng.integers(0, config.n_vocab, size=(2, 6))
    weights = np.ones((2, 6))
    weights[1, 4:] = 0
    loss = lambda: network.loss_and_grads(params, config, ids, targets, weights)[0]
    _, grads = network.loss_and_grads(params, config, ids, targets, weights)
    assert set(grads) == set(params)
    for name, array in params.items():
        assert grads[name].shape == array.shape, name
        assert_grad_close(grads[name], loss, array, n_entries=12, rng=rng, name=name)


def test_unsupported_configs_are_refused():
    from transformer_stepper.core.model.errors import ModelError

    with pytest.raises(ModelError, match="post-LN"):
        network.check_trainable(tiny_config(norm="post"))
    with pytest.raises(ModelError, match="gelu_erf"):
        network.check_trainable(tiny_config(activation="gelu_erf"))


@pytest.mark.parametrize("changes", [{"activation": "gelu_tanh"}] + SCHEMES)
def test_training_forward_equals_the_app_forward(rng, changes):
    """What the app shows is what was trained: same params, same logits, per sequence,
    even when the sequence sits in a padded batch, for every position scheme."""
    if changes.get("position") == "concat":
        changes = dict(changes, d_position=6)
    config = tiny_config(n_vocab=23, d_model=16, n_head=4, n_layer=3, n_ctx=32, **changes)
    params = perturbed_params(config, rng, np.float32)
    lengths = [9, 4, 13]
    batch = np.zeros((3, 13), dtype=np.int64)
    sequences = [rng.integers(0, config.n_vocab, size=n) for n in lengths]
    for row, seq in enumerate(sequences):
        batch[row, :len(seq)] = seq
    logits, _ = network.forward_batch(params, config, batch)
    assert logits.dtype == np.float32
    for row, seq in enumerate(sequences):
        app = forward(params, config, seq)["logits"]
        np.testing.assert_allclose(logits[row, :len(seq)], app, atol=1e-5, rtol=0)


def test_rotary_attention_backward(rng):
    """q and k turned per head before the scores; backward turns their gradients back."""
    batch, n_seq, d_model, n_head = 2, 5, 8, 2
    x = rng.normal(size=(batch, n_seq, d_model))
    w = {f"{p}.w": rng.normal(size=(d_model, d_model)) * 0.5 for p in "qkvo"}
    w.update({f"{p}.b": rng.normal(size=d_model) * 0.1 for p in "qkvo"})
    ctx = context(tiny_config(position="rotary", d_model=d_model, n_head=n_head), n_seq)
    assert ctx.cos is not None
    probe = rng.normal(size=(batch, n_seq, d_model))
    run = lambda: layers.attention_forward(x, w, n_head, ctx.mask, ctx.cos, ctx.sin)
    loss = lambda: float(np.sum(run()[0] * probe))
    dx, grads = layers.attention_backward(probe, w, run()[1])
    assert_grad_close(dx, loss, x, name="x")
    for name, array in w.items():
        assert_grad_close(grads[name], loss, array, name=name)


def test_concat_positions_occupy_exactly_their_dimensions(rng):
    """x0 = [e | p]: the token row in the first d_token dimensions, the sinusoids of width
    d_position in the last ones, nothing summed."""
    config = tiny_config(position="concat", d_position=4, n_vocab=13)
    params = network.init_params(config, rng)
    assert params["wte"].shape == (13, 4)
    ids = np.array([[3, 1, 4, 1, 5]])
    x0 = network.embed_batch(params, config, ids)
    assert x0.shape == (1, 5, 8)
    np.testing.assert_array_equal(x0[0, :, :4], params["wte"][ids[0]])
    np.testing.assert_array_equal(x0[0, :, 4:], ops.sinusoid_table(5, 4))
    recorded = {}
    forward(params, config, ids[0], record=lambda name, value, layer=None: recorded.setdefault(name, value))
    np.testing.assert_array_equal(recorded["embedding_concat"], x0[0])
    np.testing.assert_array_equal(recorded["position_embeddings"], ops.sinusoid_table(5, 4))
    assert "embedding_sum" not in recorded


def test_training_refuses_what_it_does_not_compute():
    from transformer_stepper.core.model.errors import ModelError

    for changes, words in (({"norm_kind": "rms"}, "RMSNorm"), ({"qkv_bias": False}, "biases"),
                           ({"n_kv_head": 1}, "grouped-query")):
        with pytest.raises(ModelError, match=words):
            network.check_trainable(tiny_config(**changes))
