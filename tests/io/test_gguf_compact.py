"""A GGUF model's matrices multiplied from their stored blocks (io/gguf/compact.py) give the
products of the dequantized weights as the store reads them (llama.cpp's layout undone: Llama's
permuted q/k rows, GPT-2's fused c_attn), and a head's columns are read without the matrix."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.model import params as params_lib

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gguf"
U = 2.0 ** -24


@pytest.mark.parametrize("name", ["llama_k.Q4_K_M", "gpt2_small.Q4_0", "qwen3_k.Q4_K_M", "llama_small.F16"])
def test_every_matrix_product_equals_the_dequantized_weights_product(name):
    model = load_model(FIXTURES / f"{name}.gguf")
    params = model.params
    rng = np.random.default_rng(0)
    compact = 0
    for param in params:
        if not param.endswith(".w") or len(params.shape(param)) != 2 or params.compact(param) is None:
            continue
        compact += 1
        w = params[param]                                      # the dequantized, re-laid-out weight
        x = rng.standard_normal((3, w.shape[0])).astype(np.float32)
        exact = x.astype(np.float64) @ w.astype(np.float64)
        bound = (w.shape[0] + 1) * U * (np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64))
        y = params.product(param, x)
        assert y.shape == exact.shape and (np.abs(y - exact) <= bound).all(), param
        head = slice(0, model.config.d_head)
        np.testing.assert_array_equal(params.columns(param, head), w[:, head])
    assert compact >= 4 * model.config.n_layer                 # q, k, v, o (and more) of every layer
    h = rng.standard_normal((2, model.config.d_model)).astype(np.float32)
    table = params["wte" if model.config.tied_head else "lm_head.w"]
    head_logits = params_lib.times_rows_transposed(h, params, "wte" if model.config.tied_head else "lm_head.w")
    exact = h.astype(np.float64) @ table.astype(np.float64).T
    bound = (table.shape[1] + 1) * U * (np.abs(h).astype(np.float64) @ np.abs(table).astype(np.float64).T)
    assert (np.abs(head_logits - exact) <= bound).all()


def test_a_pass_keeps_no_dequantized_matrix():
    model = load_model(FIXTURES / "llama_k.Q4_K_M.gguf")
    model.trace("The bank of the river.").logits
    assert model.params.nbytes_widened() == 0
