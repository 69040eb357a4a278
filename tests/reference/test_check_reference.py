"""Check Against Transformers (io/hf_check.py): Hugging Face run in its own process on the
app's ids agrees within 1e-4 on an HF folder and on a GGUF (transformers' dequantization);
the verdict fails, naming where, when one of the app's weights is deliberately perturbed (against
the fixture's committed Hugging Face outputs: the same numbers, without a second process); a
file transformers cannot read is a sentence, not an exception. Needs torch + transformers."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from reference_helpers import HF_OUTPUTS, load_reference, reference_texts
from transformer_stepper import load_model
from transformer_stepper.cli import main
from transformer_stepper.core.analysis.reference_check import check_trace
from transformer_stepper.core.trace.model import Model
from transformer_stepper.io.hf_check import run_check

pytestmark = pytest.mark.reference
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEXT = "She went to the bank to deposit money."


@pytest.fixture(autouse=True)
def needs_hugging_face():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")


def test_an_hf_folder_passes():
    model = load_model(FIXTURES / "gpt2_tiny_lm")
    outcome = run_check(str(FIXTURES / "gpt2_tiny_lm"), model.trace(TEXT))
    assert outcome.result is not None, outcome.reason
    assert outcome.result.passed and outcome.result.top1_agree == 1.0
    assert len(outcome.result.layers) == model.config.n_layer + 1
    assert all(layer.attention_max_abs is not None for layer in outcome.result.layers[1:])
    assert outcome.lines()[-1].startswith("PASS")


def test_a_perturbed_weight_fails_the_verdict_from_its_layer_on():
    """Against transformers' own numbers for this fixture (tests/make_fixtures.py, the arrays
    the check's process computes; that process is run by the other tests here)."""
    reference = load_reference(HF_OUTPUTS / "gpt2_tiny_lm.npz")
    clean = load_model(FIXTURES / "gpt2_tiny_lm")
    text = reference_texts(reference)[0]
    assert check_trace(clean.trace(text), reference["hidden_states_0"], reference["logits_0"],
                       reference["attentions_0"]).passed
    params = dict(clean.params)
    # layer 1 only; scaled (a constant added to every entry would shift each output row
    # evenly, which the final LayerNorm removes)
    params["h.1.mlp.proj.w"] = params["h.1.mlp.proj.w"] * np.float32(1.01)
    perturbed = Model(clean.config, params, clean.tokenizer, source=clean.source)
    trace = perturbed.trace(text)
    np.testing.assert_array_equal(trace.input_ids, reference["input_ids_0"])
    result = check_trace(trace, reference["hidden_states_0"], reference["logits_0"], reference["attentions_0"])
    assert result is not None and not result.passed
    embedding, layer_0, layer_1 = result.layers
    assert embedding.hidden_max_abs <= 1e-4 and layer_0.hidden_max_abs <= 1e-4
    assert layer_1.hidden_max_abs > 1e-4
    assert any(line.startswith("FAIL") for line in result.lines())


def test_a_gguf_against_transformers_dequantization(capsys):
    path = FIXTURES / "gguf" / "llama_small.Q8_0.gguf"
    code = main(["check", "--model", str(path), "--text", TEXT])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PASS" in out
    if importlib.util.find_spec("llama_cpp") is None:
        assert "llama-cpp-python is not installed" in out
    else:                     # tests/reference/test_llama_cpp_reference.py checks its figures
        assert "llama.cpp: top-1 agreement" in out


def test_a_file_transformers_cannot_read_is_a_sentence(capsys):
    path = FIXTURES / "gguf" / "gemma_k.Q6_K.gguf"           # transformers reads no Gemma 1 GGUF
    code = main(["check", "--model", str(path), "--text", TEXT])
    out = capsys.readouterr().out
    assert code == 3 and "transformers cannot run" in out and "Traceback" not in out
