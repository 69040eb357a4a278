"""Interventions in an encoder–decoder against Hugging Face forward hooks on the same head
(tests/make_seq2seq_intervention_fixtures.py): a cross-attention head, an encoder and a decoder
self-attention head ablated, the source's positions removed. Teacher-forced outputs at every
stage HF reports, and the greedy translation under the intervention."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.core.model.interventions import AblateHead
from transformer_stepper.core.trace.seq2seq_generate import generate
from transformer_stepper.core.model.seq2seq_interventions import InStack, NoSourcePositions
from transformer_stepper.io.loader import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REF = np.load(FIXTURES / "hf_outputs" / "seq2seq_interventions.npz")
CASES = {"cross_1_2": InStack("cross", AblateHead(1, 2)), "encoder_0_1": InStack("encoder", AblateHead(0, 1)),
         "decoder_1_3": InStack("decoder", AblateHead(1, 3)), "no_source_positions": NoSourcePositions()}
ARRAYS = ("encoder_hidden_states", "decoder_hidden_states", "cross_attentions", "logits")


@pytest.fixture(scope="module", params=("t5_tiny", "bart_tiny", "marian_tiny"))
def named(request):
    name = request.param
    return name, load_model(FIXTURES / name), np.load(FIXTURES / "hf_outputs" / f"{name}.npz")


@pytest.mark.parametrize("case", CASES)
def test_intervened_pass_equals_a_hugging_face_hook(named, case):
    name, model, clean_ref = named
    clean = model.trace(str(clean_ref["source_0"]), str(clean_ref["target_0"]))
    intervened = model.intervene(clean, [CASES[case]])
    changed = False
    for array in ARRAYS:
        expected = REF[f"{name}_{case}_{array}"]
        np.testing.assert_allclose(getattr(intervened, array), expected, atol=1e-4, rtol=0,
                                   err_msg=f"{name} {case} {array}")
        changed |= not np.allclose(getattr(clean, array), expected, atol=1e-3)
    assert changed, f"{name} {case}: the hook changed nothing, the test would not see a wrong ablation"


@pytest.mark.parametrize("case", CASES)
def test_the_translation_under_the_intervention_equals_hugging_face(named, case):
    name, model, clean_ref = named
    trace = model.trace(str(clean_ref["source_0"]), interventions=[CASES[case]])
    steps = generate(model, trace, 12)
    np.testing.assert_array_equal(steps[-1].decoder.input_ids, REF[f"{name}_{case}_generated"])
    assert steps[-1].interventions == (CASES[case],)
