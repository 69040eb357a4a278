"""Greedy generation of 20 tokens equals Hugging Face's generate(do_sample=False) token for
token, and zeroing one head's attention output equals HF with the same head zeroed by a hook
(committed references from tests/make_fixtures.py)."""
import numpy as np
import pytest

from reference_helpers import ATOL, HF_OUTPUTS, load_reference
from transformer_stepper import load_model
from transformer_stepper.core.trace.generate import generate
from transformer_stepper.core.model.tokenize import Encoded

pytestmark = pytest.mark.reference
DECODERS = ("llama_tiny", "llama_tiny_mha", "llama_tiny_gqa4", "mistral_tiny", "qwen2_tiny",
            "qwen3_tiny", "gemma_tiny", "gemma2_tiny", "gemma3_tiny", "olmo2_tiny", "smollm3_tiny",
            "phi3_tiny", "phi35_tiny", "phi4_mini_tiny", "pythia_tiny", "neox_tiny_sequential",
            "llama_tiny_yarn", "llama_tiny_dynamic")


@pytest.mark.parametrize("name", ("phi35_tiny", "phi4_mini_tiny", "llama_tiny_dynamic", "pythia_tiny"))
def test_kv_cache_extension_equals_a_retrace(name, fixtures_dir):
    """Extending a trace token by token (the KV cache) gives a re-trace's numbers, also where the
    rotary frequencies change with the length (longrope past its original context, dynamic past
    max_position_embeddings): there the cache is dropped and every row recomputed."""
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    model = load_model(fixtures_dir / name)
    ids = reference["generated_ids_0"]
    trace = prompt_trace(model, ids[:4])
    for token in ids[4:]:
        trace = model.extend(trace, [token])
    whole = prompt_trace(model, ids)
    np.testing.assert_allclose(trace.hidden_states, whole.hidden_states, atol=ATOL)
    np.testing.assert_allclose(trace.attentions, whole.attentions, atol=ATOL)
    cut = model.truncate(trace, 6)
    np.testing.assert_allclose(cut.hidden_states, prompt_trace(model, ids[:6]).hidden_states, atol=ATOL)


def prompt_trace(model, ids):
    return model.trace_encoded(Encoded(tokens=tuple(model.tokenizer.id_to_token(i) for i in ids),
                                       input_ids=ids, token_type_ids=np.zeros(len(ids), np.int64),
                                       offsets=np.zeros((len(ids), 2), np.int64),
                                       special_tokens_mask=np.zeros(len(ids), bool), truncated=False))


@pytest.mark.parametrize("name", DECODERS)
def test_greedy_generation_equals_hugging_face(name, fixtures_dir):
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    model = load_model(fixtures_dir / name)
    prompt = reference["input_ids_0"]
    expected = reference["generated_ids_0"]
    assert len(expected) == len(prompt) + 20
    steps = generate(model, prompt_trace(model, prompt), 20)
    np.testing.assert_array_equal(steps[-1].input_ids, expected)


def test_generate_command_prints_hugging_faces_greedy_continuation(fixtures_dir, capsys, tmp_path):
    from transformer_stepper.cli import main

    reference = load_reference(HF_OUTPUTS / "llama_tiny.npz")
    model = load_model(fixtures_dir / "llama_tiny")
    text = str(reference["text_0"])
    expected_ids = reference["generated_ids_0"][len(reference["input_ids_0"]):]
    expected = "".join(model.tokenizer.continuation(reference["input_ids_0"], expected_ids))
    out = tmp_path / "g.npz"
    assert main(["generate", "--model", str(fixtures_dir / "llama_tiny"), "--text", text,
                 "--tokens", "20", "--trace", str(out)]) == 0
    assert capsys.readouterr().out.rstrip("\n") == expected
    with np.load(out, allow_pickle=False) as saved:
        np.testing.assert_array_equal(saved["input_ids"], reference["generated_ids_0"])


@pytest.mark.parametrize("name", DECODERS)
def test_zero_ablation_equals_hugging_face_with_the_head_hooked_out(name, fixtures_dir):
    from transformer_stepper import AblateHead

    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    model = load_model(fixtures_dir / name)
    layer, head = int(reference["ablated_layer"]), int(reference["ablated_head"])
    trace = model.trace_encoded(_encoded(model, reference["input_ids_0"]),
                                interventions=[AblateHead(layer, head)])
    np.testing.assert_allclose(trace.hidden_states, reference["ablated_hidden_states_0"], atol=ATOL)
    np.testing.assert_allclose(trace.logits, reference["ablated_logits_0"], atol=ATOL)
    clean = reference["hidden_states_0"]
    assert not np.allclose(clean[-1], reference["ablated_hidden_states_0"][-1], atol=ATOL)


def _encoded(model, ids):
    return Encoded(tokens=tuple(model.tokenizer.id_to_token(i) for i in ids), input_ids=ids,
                   token_type_ids=np.zeros(len(ids), np.int64), offsets=np.zeros((len(ids), 2), np.int64),
                   special_tokens_mask=np.zeros(len(ids), bool), truncated=False)
