"""Provenance of a weight ("param:NAME"): a GGUF weight's block arithmetic ends at the value the
forward pass reads, and its Python recomputes it; a plain checkpoint's weight is its stored
value; a looked-up embedding of a GGUF model carries its table entry's block arithmetic."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.analysis.provenance.explain import explain

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gguf"


@pytest.mark.parametrize("file_name, param, index, kind", [
    ("llama_k.Q4_K_M.gguf", "h.0.attn.q.w", (17, 130), "Q4_K"),
    ("llama_k.Q4_K_M.gguf", "h.0.mlp.proj.w", (200, 3), "Q6_K"),
    ("gpt2_small.Q4_0.gguf", "h.0.attn.k.w", (5, 9), "Q4_0"),
    ("llama_small.Q8_0.gguf", "wte", (42, 7), "Q8_0"),
    ("gemma_k.Q6_K.gguf", "h.0.ln_1.g", (11,), "F32"),
    ("llama_k.Q5_K_M.gguf", "h.0.mlp.up.w", (100, 7), "Q5_K"),
    ("llama_k.Q3_K_M.gguf", "h.0.attn.k.w", (3, 70), "Q3_K"),
    ("llama_k.Q2_K.gguf", "wte", (30, 255), "Q2_K"),
    ("llama_k.IQ4_XS.gguf", "h.0.attn.o.w", (129, 4), "IQ4_XS"),
    ("llama_small.IQ4_NL.gguf", "h.1.mlp.gate.w", (40, 90), "IQ4_NL"),
    ("llama_small.MXFP4.gguf", "h.0.attn.q.w", (63, 17), "MXFP4")])
def test_weight_provenance_equals_the_dequantized_value(file_name, param, index, kind):
    model = load_model(FIXTURES / file_name)
    trace = model.trace("The bank of the river.")
    e = explain(model, trace, "param:" + param, index)
    full = model.params[param]
    assert e.value == e.traced == float(full[index])
    assert f"({kind})" in e.title and "row" in e.title and "block" in e.title
    scope = {"model": model, "trace": trace}
    exec(e.python, scope)
    assert float(scope["value"]) == float(full[index])
    if kind != "F32":
        assert any("q[" in s.label for s in e.steps) and any(s.label.startswith("d ") for s in e.steps)


def test_gemma_norm_gain_shows_both_conversions():
    model = load_model(FIXTURES / "gemma_k.Q6_K.gguf")
    e = explain(model, model.trace("river"), "param:h.0.ln_1.g", (3,))
    labels = [s.label for s in e.steps]
    assert labels[-2].startswith("− 1") and labels[-1].startswith("+ 1")


def test_plain_checkpoint_weight_is_its_stored_value():
    model = load_model(None)
    trace = model.trace("the bank")
    e = explain(model, trace, "param:h.0.attn.q.w", (1, 2))
    assert e.value == float(model.params["h.0.attn.q.w"][1, 2]) and len(e.steps) == 1
    with pytest.raises(IndexError):
        explain(model, trace, "param:h.0.attn.q.w", (10**6, 0))
    with pytest.raises(KeyError):
        explain(model, trace, "param:nope", (0,))


def test_lookup_of_a_quantized_table_shows_the_block():
    model = load_model(FIXTURES / "llama_k.Q4_K_M.gguf")
    trace = model.trace("The bank of the river.")
    e = explain(model, trace, "token_embeddings", (1, 5))
    token_id = int(trace.input_ids[1])
    assert e.sources and e.sources[0].index == (token_id, 5)
    assert e.sources[0].value == e.value == float(np.asarray(trace["token_embeddings"])[1, 5])
