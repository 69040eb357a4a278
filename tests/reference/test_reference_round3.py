"""Gemma 2, Gemma 3, OLMo 2 and SmolLM3 (tests/make_fixtures.py round3_configs): each per-layer
or per-family branch of the pass is needed to match Hugging Face (the model without it departs
from HF's numbers), the KV cache agrees with a re-trace, and a lone file without config.json is
told apart from Llama and refused in one line naming the config.json it needs."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from reference_helpers import ATOL, HF_OUTPUTS, load_reference, reference_texts
from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.trace.model import Model

pytestmark = pytest.mark.reference


def _departs(model, changes: dict, name: str) -> bool:
    """The model with config `changes` no longer matches HF's hidden states / logits (text 2)."""
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    changed = Model(model.config.replace(**changes), model.params, model.tokenizer, model.source)
    trace = changed.trace(reference_texts(reference)[2])
    return not (np.allclose(trace.hidden_states, reference["hidden_states_2"], atol=ATOL)
                and np.allclose(trace.logits, reference["logits_2"], atol=ATOL))


def test_gemma2_fixture_needs_every_gemma2_branch(fixtures_dir):
    model = load_model(fixtures_dir / "gemma2_tiny")
    config = model.config
    assert config.norm == "sandwich" and config.local_layers == (0, 2) and config.sliding_window == 4
    assert (config.attn_softcap, config.final_softcap, config.query_scale) == (50.0, 30.0, 12.0)
    for changes in ({"attn_softcap": 0.0}, {"final_softcap": 0.0}, {"query_scale": 0.0},
                    {"local_layers": (), "sliding_window": 0}, {"local_layers": (0, 1, 2)}):
        assert _departs(model, changes, "gemma2_tiny"), changes


def test_gemma3_fixture_needs_local_rope_base_and_windows(fixtures_dir):
    model = load_model(fixtures_dir / "gemma3_tiny")
    config = model.config
    assert config.local_layers == (0, 1, 3) and config.qk_norm and not config.attn_softcap
    assert (config.rope_theta, config.rope_local_theta, config.rope_scaling) == (1e6, 1e4, "linear")
    for changes in ({"rope_local_theta": 0.0}, {"local_layers": (0, 1, 2, 3)},
                    {"sliding_window": 40}, {"rope_scaling": ""}):
        assert _departs(model, changes, "gemma3_tiny"), changes


def test_olmo2_and_smollm3_fixtures_need_their_branches(fixtures_dir):
    olmo = load_model(fixtures_dir / "olmo2_tiny")
    assert olmo.config.norm == "branch_out" and olmo.config.qk_norm_over == "projection"
    assert "h.0.ln_1.g" not in olmo.params and olmo.params["h.0.attn.q_norm.g"].shape == (32,)
    smol = load_model(fixtures_dir / "smollm3_tiny")
    assert smol.config.nope_layers == (3,)
    assert _departs(smol, {"nope_layers": ()}, "smollm3_tiny")


@pytest.mark.parametrize("name", ["gemma2_tiny", "gemma3_tiny", "olmo2_tiny", "smollm3_tiny"])
def test_kv_cache_extension_equals_a_retrace(name, fixtures_dir):
    """Growing a text token by token (local windows slide, NoPE layers stay unrotated) equals
    tracing the whole text at once."""
    model = load_model(fixtures_dir / name)
    reference = load_reference(HF_OUTPUTS / f"{name}.npz")
    ids = reference["generated_ids_0"]
    prompt = model.trace(reference_texts(reference)[0])
    grown = prompt
    for token in ids[len(prompt.input_ids):len(prompt.input_ids) + 6]:
        grown = model.extend(grown, [int(token)])
    whole = model.trace_encoded(_encoded(model, grown.input_ids))
    np.testing.assert_allclose(grown.hidden_states, whole.hidden_states, atol=ATOL)
    np.testing.assert_allclose(grown.logits, whole.logits, atol=ATOL)
    for layer in range(model.config.n_layer):    # the lazily recomputed detail too
        np.testing.assert_allclose(grown.layer("attn_weights", layer), whole.layer("attn_weights", layer),
                                   atol=ATOL)


def _encoded(model, ids):
    from transformer_stepper.core.model.tokenize import Encoded
    return Encoded(tokens=tuple(model.tokenizer.id_to_token(int(i)) for i in ids), input_ids=ids,
                   token_type_ids=np.zeros(len(ids), np.int64), offsets=np.zeros((len(ids), 2), np.int64),
                   special_tokens_mask=np.zeros(len(ids), bool), truncated=False)


@pytest.mark.parametrize("name, family", [("gemma2_tiny", "Gemma 2"), ("gemma3_tiny", "Gemma 3"),
                                          ("olmo2_tiny", "OLMo 2")])
def test_lone_file_without_config_is_told_apart_and_refused(name, family, fixtures_dir, tmp_path):
    for file in ("model.safetensors", "tokenizer.json"):
        shutil.copy(fixtures_dir / name / file, tmp_path / file)
    with pytest.raises(ModelError) as caught:
        load_model(tmp_path / "model.safetensors")
    message = str(caught.value)
    assert message.startswith(str(tmp_path / "model.safetensors")) and "\n" not in message
    assert family in message and "config.json beside" in message
