"""The committed tiny random BERT/GPT-2 fixtures, traced by the app, against Hugging Face's
outputs for the same files (tests/make_fixtures.py wrote both; no torch needed here)."""
from __future__ import annotations

import json
import struct

import pytest

from reference_helpers import (HF_OUTPUTS, TINY_FIXTURES, assert_trace_matches, load_reference,
                               reference_texts)
from transformer_stepper import load_model

pytestmark = pytest.mark.reference


def _tensor_names(folder) -> set[str]:
    with open(folder / "model.safetensors", "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    header.pop("__metadata__", None)
    return set(header)


@pytest.mark.parametrize("name", TINY_FIXTURES)
def test_tiny_fixture_matches_hugging_face(name, fixtures_dir):
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    model = load_model(fixtures_dir / name)
    assert model.warnings == []
    for t, text in enumerate(reference_texts(reference)):
        trace = model.trace(text)
        assert not trace.truncated
        assert_trace_matches(trace, reference, t, f"{name} text {t} {text!r}")


def test_fixture_files_carry_the_spellings_the_loader_must_handle(fixtures_dir):
    """Guards the fixtures themselves: a regenerated set must keep exercising these paths."""
    bert = _tensor_names(fixtures_dir / "bert_tiny")
    assert "embeddings.word_embeddings.weight" in bert and not any(n.startswith("bert.") for n in bert)

    mlm = _tensor_names(fixtures_dir / "bert_tiny_mlm")
    assert "bert.embeddings.LayerNorm.weight" in mlm and "cls.predictions.bias" in mlm

    old = _tensor_names(fixtures_dir / "bert_tiny_gamma_beta")
    assert "bert.embeddings.LayerNorm.gamma" in old and "cls.predictions.transform.LayerNorm.beta" in old
    assert not any(n.endswith("LayerNorm.weight") or n.endswith("LayerNorm.bias") for n in old)

    lm = _tensor_names(fixtures_dir / "gpt2_tiny_lm")
    assert "transformer.wte.weight" in lm and "transformer.h.0.attn.bias" in lm
    assert "lm_head.weight" not in lm  # tied to wte, so save_pretrained drops it

    base = _tensor_names(fixtures_dir / "gpt2_tiny")
    assert {"wte.weight", "h.0.attn.bias", "h.0.attn.masked_bias"} <= base


def test_references_are_not_trivial():
    """Random init with real spread: attention far from uniform, LM heads present."""
    for name in TINY_FIXTURES:
        reference = load_reference(HF_OUTPUTS / f"{name}.npz")
        attentions = reference["attentions_2"]
        n_seq = attentions.shape[-1]
        assert attentions.max(-1).mean() > 3.0 / n_seq, name
    assert "logits_0" in load_reference(HF_OUTPUTS / "gpt2_tiny_lm.npz")
    assert "logits_0" in load_reference(HF_OUTPUTS / "bert_tiny_gamma_beta.npz")
