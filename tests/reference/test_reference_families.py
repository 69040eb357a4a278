"""The committed tiny Llama, Mistral, Qwen2, Qwen3, Gemma, RoBERTa and DistilBERT fixtures,
traced by the app from the HF folder and as a lone .safetensors, against Hugging Face's
outputs (tests/make_fixtures.py wrote both; no torch needed here)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from reference_helpers import HF_OUTPUTS, assert_trace_matches, load_reference, reference_texts
from transformer_stepper import load_model

pytestmark = pytest.mark.reference

ROUND3_FIXTURES = ("gemma2_tiny", "gemma3_tiny", "olmo2_tiny", "smollm3_tiny")
FAMILY_FIXTURES = ("llama_tiny", "llama_tiny_mha", "llama_tiny_gqa4", "mistral_tiny", "qwen2_tiny",
                   "qwen3_tiny", "gemma_tiny", "roberta_tiny", "distilbert_tiny", *ROUND3_FIXTURES,
                   "phi3_tiny", "phi35_tiny", "phi4_mini_tiny", "pythia_tiny", "neox_tiny_sequential",
                   "llama_tiny_yarn", "llama_tiny_dynamic")


@pytest.mark.parametrize("name", FAMILY_FIXTURES)
def test_family_fixture_matches_hugging_face(name, fixtures_dir):
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    model = load_model(fixtures_dir / name)
    assert model.warnings == []
    for t, text in enumerate(reference_texts(reference)):
        trace = model.trace(text)
        assert not trace.truncated
        assert_trace_matches(trace, reference, t, f"{name} text {t} {text!r}")


@pytest.mark.parametrize("name", FAMILY_FIXTURES)
def test_family_fixture_opens_as_a_lone_safetensors_with_its_config(name, fixtures_dir, tmp_path):
    """The file alone in a folder with its tokenizer.json and config.json beside it under
    another name than the folder's: the same numbers."""
    for file in ("model.safetensors", "tokenizer.json", "config.json"):
        shutil.copy(fixtures_dir / name / file, tmp_path / file)
    (tmp_path / "model.safetensors").rename(tmp_path / f"{name}.safetensors")
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    trace = load_model(tmp_path / f"{name}.safetensors").trace(reference_texts(reference)[0])
    assert_trace_matches(trace, reference, 0, f"{name} (lone file)")


def test_fixtures_exercise_what_they_claim(fixtures_dir):
    def config(name):
        return json.loads((fixtures_dir / name / "config.json").read_text())

    def model(name):
        return load_model(fixtures_dir / name).config

    assert model("llama_tiny").group_size == 2 and not model("llama_tiny").tied_head
    assert model("llama_tiny_mha").group_size == 1 and model("llama_tiny_mha").tied_head
    assert model("llama_tiny_gqa4").group_size == 4 and model("llama_tiny_gqa4").rope_scaling == "llama3"
    assert model("llama_tiny_mha").rope_scaling == "linear"
    assert model("mistral_tiny").sliding_window == 4
    assert model("qwen2_tiny").qkv_bias and not model("qwen2_tiny").o_bias
    assert model("qwen3_tiny").qk_norm and model("qwen3_tiny").d_head * 4 != config("qwen3_tiny")["hidden_size"]
    assert model("gemma_tiny").embed_scale == pytest.approx(np.sqrt(32))
    assert model("roberta_tiny").position_offset == 2
    assert model("phi3_tiny").sliding_window == 5 and model("phi3_tiny").gated_mlp
    phi35, phi4 = model("phi35_tiny"), model("phi4_mini_tiny")
    assert phi35.rope_scaling == phi4.rope_scaling == "longrope" and phi35.rope_original_n_ctx == 8
    assert phi35.rope_attention_factor == pytest.approx(np.sqrt(1 + np.log(8) / np.log(8)))
    assert phi4.rotary_dim == 12 and phi4.d_head == 16 and phi4.tied_head and phi4.group_size == 2
    pythia, sequential = model("pythia_tiny"), model("neox_tiny_sequential")
    assert pythia.parallel_residual and pythia.rotary_dim == 4 and not pythia.tied_head
    assert not sequential.parallel_residual and sequential.rotary_dim == 8
    assert model("llama_tiny_yarn").rope_scaling == "yarn"
    assert model("llama_tiny_yarn").rope_attention_factor == pytest.approx(0.1 * np.log(4) + 1)
    assert model("llama_tiny_dynamic").rope_scaling == "dynamic"
    # the long factors, dynamic scaling and yarn's ramp are reached by the reference texts
    for name, beyond in (("phi35_tiny", 8), ("phi4_mini_tiny", 16), ("llama_tiny_dynamic", 20)):
        lengths = [len(load_reference(HF_OUTPUTS / f"{name}.npz")[f"input_ids_{t}"]) for t in range(3)]
        assert min(lengths) <= beyond < max(lengths), (name, lengths)
    # the sliding window matters for the reference texts (longer than the window)
    reference = load_reference(HF_OUTPUTS / "mistral_tiny.npz")
    assert len(reference["input_ids_2"]) > 4


@pytest.mark.parametrize("name, first", [("llama_tiny", "<|begin_of_text|>"), ("llama_tiny_mha", "<s>"),
                                         ("gemma_tiny", "<bos>"), ("roberta_tiny", "<s>")])
def test_tokenizers_add_the_special_tokens_hugging_face_adds(name, first, fixtures_dir):
    trace = load_model(fixtures_dir / name).trace("the bank")
    assert trace.tokens[0] == first and trace.special_tokens_mask[0]
    qwen = load_model(fixtures_dir / "qwen2_tiny").trace("the bank")
    assert not qwen.special_tokens_mask.any(), "Qwen adds no special tokens"


def test_roberta_positions_skip_pad_tokens_as_hugging_face_does(fixtures_dir):
    """The reference's fourth RoBERTa text holds <pad> tokens: HF gives them position
    padding_idx and does not count them; provenance names the row each token read."""
    from transformer_stepper.core.analysis.provenance.explain import explain

    reference = load_reference(HF_OUTPUTS / "roberta_tiny.npz")
    model = load_model(fixtures_dir / "roberta_tiny")
    text = str(reference["text_3"])
    assert (reference["input_ids_3"] == 1).sum() == 3
    trace = model.trace(text)
    assert_trace_matches(trace, reference, 3, "roberta with pad tokens")
    last = len(trace.input_ids) - 1                  # </s>: 12 tokens, 3 of them pads
    explanation = explain(model, trace, "position_embeddings", (last, 0))
    assert "row 10 of the position table" in explanation.steps[0].label
    assert explanation.value == pytest.approx(float(model.params["wpe"][10, 0]))
