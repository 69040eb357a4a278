"""GGUF files (tests/make_gguf_fixtures.py: tiny random models written the way llama.cpp's
converter writes them, F16/Q8_0/Q4_0/Q6_K/Q4_K_M, and Q5_K_M/Q3_K_M/Q2_K/IQ4_XS/IQ4_NL/MXFP4
packed by tests/gguf_packers.py) against Hugging Face loading the same file
(`from_pretrained(dir, gguf_file=...)`, fp32, eager): tokenizer ids on varied text, hidden
states, attentions, logits and greedy generation within 1e-4."""
from pathlib import Path

import numpy as np
import pytest

from reference_helpers import assert_trace_matches, load_reference, reference_texts
from test_reference_generation import prompt_trace
from transformer_stepper import load_model
from transformer_stepper.core.trace.generate import generate

pytestmark = pytest.mark.reference
GGUF_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "gguf"
FILES = sorted(p.name for p in GGUF_DIR.glob("*.gguf"))


def test_every_architecture_and_quant_type_has_a_fixture():
    archs = {name.split("_")[0] for name in FILES}
    schemes = {name.split(".")[1] for name in FILES}
    assert archs == {"llama", "qwen2", "qwen3", "gemma", "gpt2"}
    assert schemes == {"F16", "Q8_0", "Q4_0", "Q6_K", "Q4_K_M", "Q5_K_M", "Q3_K_M", "Q2_K", "IQ4_XS",
                       "IQ4_NL", "MXFP4"}


@pytest.fixture(scope="module", params=FILES)
def case(request):
    return load_model(GGUF_DIR / request.param), load_reference(GGUF_DIR / request.param.replace(".gguf", ".npz"))


def test_tokenizer_ids_equal_hugging_faces_gguf_tokenizer(case):
    model, reference = case
    count = sum(1 for name in reference if name.startswith("tokenizer_text_"))
    assert count >= 8
    for t in range(count):
        text = str(reference[f"tokenizer_text_{t}"])
        ids = model.tokenizer.encode(text, 4096).input_ids
        np.testing.assert_array_equal(ids, reference[f"tokenizer_ids_{t}"], err_msg=repr(text))


def test_trace_matches_hugging_face(case):
    model, reference = case
    for t, text in enumerate(reference_texts(reference)):
        assert_trace_matches(model.trace(text), reference, t, f"{model.name} text {t}")


def test_greedy_generation_equals_hugging_face(case):
    model, reference = case
    prompt, expected = reference["input_ids_0"], reference["generated_ids_0"]
    steps = generate(model, prompt_trace(model, prompt), len(expected) - len(prompt))
    np.testing.assert_array_equal(steps[-1].input_ids, expected)
