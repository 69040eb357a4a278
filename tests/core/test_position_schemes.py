"""The position schemes the positions laboratory compares: config checks for concat, and
what each scheme lets the first layer see."""
import numpy as np
import pytest

from tests.builders import model_error
from transformer_stepper.core.model import ops
from transformer_stepper.core.model.config import ModelConfig
from transformer_stepper.core.model.forward import forward
from transformer_stepper.core.model.head import output_direction
from transformer_stepper.core.model.params import expected_shapes
from transformer_stepper.core.training import network


def config(**changes):
    base = dict(family="stepper", n_vocab=17, n_ctx=32, d_model=16, n_head=2, n_layer=2, d_ff=24,
                position="concat", d_position=6, causal=True, activation="relu", final_norm=True,
                lm_head=True)
    base.update(changes)
    return ModelConfig(**base)


@pytest.mark.parametrize("changes, words", [
    ({"d_position": 0}, "even d_position between 0 and d_model=16 (exclusive), got 0"),
    ({"d_position": 16}, "got 16"),
    ({"d_position": 5}, "got 5"),
    ({"d_position": -2}, "d_position must be a non-negative integer, got -2"),
    ({"position": "sinusoidal"}, "d_position=6 is only for concat positions, not 'sinusoidal'"),
    ({"n_token_types": 2}, "token type"),
])
def test_bad_d_position_is_one_line(changes, words):
    message = model_error(config, **changes)
    assert words in message


def test_concat_shapes_and_the_tied_head_reads_the_token_part():
    c = config()
    assert c.d_token == 10 and config(position="learned", d_position=0).d_token == 16
    shapes = expected_shapes(c)
    assert shapes["wte"] == (17, 10) and "wpe" not in shapes and "lm_head.w" not in shapes
    assert expected_shapes(c.replace(tied_head=False))["lm_head.w"] == (17, 16)
    params = network.init_params(c, np.random.default_rng(0))
    ids = np.array([1, 5, 2, 9])
    out = forward(params, c, ids)
    h = out["last_hidden_state"]
    np.testing.assert_allclose(out["logits"], h[:, :10] @ params["wte"].T, rtol=1e-6, atol=1e-6)
    direction = output_direction(params, c, 5)
    assert direction.shape == (16,) and not direction[10:].any()
    np.testing.assert_allclose(h @ direction, out["logits"][:, 5], rtol=1e-5, atol=1e-6)


def _first_attention_out(params, c, ids):
    recorded = {}

    def record(name, value, layer=None):
        if layer == 0 or layer is None:
            recorded.setdefault(name, value)

    forward(params, c, ids, record=record)
    return recorded["attn_out"]


def test_without_positions_attention_sees_a_set():
    """No positions: permuting the tokens before the last leaves the first layer's attention
    output at the last position unchanged (only the mask and depth leak order). With
    positions it changes."""
    rng = np.random.default_rng(3)
    ids = np.array([3, 7, 1, 12, 4, 9])
    shuffled = np.concatenate([ids[:-1][[3, 0, 4, 2, 1]], ids[-1:]])
    for position, invariant in (("none", True), ("sinusoidal", False), ("rotary", False),
                              ("concat", False)):
        c = config(position=position, d_position=6 if position == "concat" else 0)
        params = network.init_params(c, rng)
        before = _first_attention_out(params, c, ids)[-1]
        after = _first_attention_out(params, c, shuffled)[-1]
        if invariant:
            np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6)
        else:
            assert not np.allclose(after, before, rtol=1e-5, atol=1e-6), position
