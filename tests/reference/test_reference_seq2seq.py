"""The encoder–decoders (T5 v1.0 / v1.1, BART, mBART, Marian) against Hugging Face: the fixtures
of tests/make_seq2seq_fixtures.py (teacher-forced outputs and greedy generate)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.core.trace.seq2seq_generate import generate
from transformer_stepper.io.loader import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NAMES = ("t5_tiny", "t5_v11_tiny", "bart_tiny", "mbart_tiny", "marian_tiny")
ARRAYS = ("encoder_hidden_states", "encoder_attentions", "decoder_hidden_states",
          "decoder_attentions", "cross_attentions", "logits")


@pytest.fixture(scope="module", params=NAMES)
def pair(request):
    name = request.param
    return name, load_model(FIXTURES / name), np.load(FIXTURES / "hf_outputs" / f"{name}.npz")


@pytest.mark.parametrize("t", range(3))
def test_teacher_forced_outputs_match_hf(pair, t):
    name, model, ref = pair
    trace = model.trace(str(ref[f"source_{t}"]), str(ref[f"target_{t}"]))
    np.testing.assert_array_equal(trace.encoder.input_ids, ref[f"input_ids_{t}"])
    np.testing.assert_array_equal(trace.decoder.input_ids, ref[f"decoder_input_ids_{t}"])
    for array in ARRAYS:
        np.testing.assert_allclose(getattr(trace, array), ref[f"{array}_{t}"], atol=1e-4, rtol=0,
                                   err_msg=f"{name} {array}")


def test_target_ids_match_text_target(pair):
    # the target tokenizer's ids (HF's text_target), EOS included, are the labels
    _, model, ref = pair
    for t in range(3):
        ids, notices = model.encode_target(str(ref[f"target_{t}"]))
        np.testing.assert_array_equal(ids, ref[f"labels_{t}"][:-1])
        assert ref[f"labels_{t}"][-1] == model.config.eos_token_id and notices == ()


def test_greedy_generation_matches_hf(pair):
    _, model, ref = pair
    steps = generate(model, model.trace(str(ref["source_0"])), 12)
    np.testing.assert_array_equal(steps[-1].decoder.input_ids, ref["generated_ids_0"])


def test_cached_steps_equal_a_whole_pass(pair):
    # each step computes one new position; the result equals tracing the whole target at once
    _, model, ref = pair
    stepped = generate(model, model.trace(str(ref["source_1"])), 6)[-1]
    whole = model.trace(str(ref["source_1"]), target_ids=stepped.decoder.input_ids[1:])
    assert stepped.decoder.computed_rows == 1
    for array in ("decoder_hidden_states", "cross_attentions", "decoder_attentions", "logits"):
        np.testing.assert_allclose(getattr(stepped, array), getattr(whole, array), atol=1e-5, rtol=0)
