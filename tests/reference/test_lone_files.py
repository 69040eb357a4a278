"""A lone .safetensors without config.json (issue 26): a file whose family or settings cannot be
told is refused in one line saying which config.json to put beside it; one that can run does so
with every guessed setting named (Model.settings_guessed, the warning), and a Qwen3 file takes
its head width from q_norm instead of failing on its shape."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tests.builders import model_error
from reference_helpers import HF_OUTPUTS, assert_trace_matches, load_reference
from transformer_stepper import load_model

pytestmark = pytest.mark.reference


def lone(fixtures_dir, tmp_path, name, edit=None):
    """The fixture's weights (edited) and tokenizer.json, without config.json."""
    tensors = load_file(str(fixtures_dir / name / "model.safetensors"))
    if edit is not None:
        tensors = edit(tensors)
    path = tmp_path / f"{name}.safetensors"
    save_file(tensors, str(path))
    shutil.copy(fixtures_dir / name / "tokenizer.json", tmp_path / "tokenizer.json")
    return path


@pytest.mark.parametrize("name, says", [
    ("phi3_tiny", "microsoft/Phi-3-mini-4k-instruct"), ("pythia_tiny", "EleutherAI/pythia-160m")])
def test_fused_layouts_without_config_are_refused(fixtures_dir, tmp_path, name, says):
    path = lone(fixtures_dir, tmp_path, name)
    message = model_error(load_model, path)
    assert message.startswith(f"{path}: ") and "config.json" in message and says in message


def test_a_gemma_file_is_not_run_as_llama(fixtures_dir, tmp_path):
    """Gemma stores its norm gains as w for (1 + w): centred on 0, where Llama's are near 1."""
    def as_released(tensors):
        return {k: (v - 1 if k.endswith("norm.weight") else v) for k, v in tensors.items()}

    path = lone(fixtures_dir, tmp_path, "gemma_tiny", as_released)
    message = model_error(load_model, path)
    assert "centred on 0" in message and "Gemma" in message and "config.json beside it" in message


@pytest.mark.parametrize("extra, says", [
    ("model.layers.0.pre_feedforward_layernorm.weight", "Gemma 2"),
    ("model.layers.0.post_feedforward_layernorm.weight", "OLMo 2")])
def test_sandwich_and_post_norm_files_are_refused(fixtures_dir, tmp_path, extra, says):
    def add(tensors):
        if "OLMo" in says:
            tensors = {k: v for k, v in tensors.items() if "input_layernorm" not in k}
        return {**tensors, extra: np.ones(32, np.float32)}

    message = model_error(load_model, lone(fixtures_dir, tmp_path, "llama_tiny", add))
    assert says in message and "config.json beside it" in message


def test_olmo2_whole_projection_qk_norms_are_refused(fixtures_dir, tmp_path):
    def widen(tensors):
        return {k: (np.ones(tensors[k.replace("q_norm", "q_proj")].shape[0], np.float32)
                    if k.endswith("q_norm.weight") else v) for k, v in tensors.items()}

    message = model_error(load_model, lone(fixtures_dir, tmp_path, "qwen3_tiny", widen))
    assert "OLMo 2" in message and "whole projection" in message


def test_qwen3_file_takes_its_head_width_from_q_norm_and_names_its_guesses(fixtures_dir, tmp_path):
    model = load_model(lone(fixtures_dir, tmp_path, "qwen3_tiny"))
    assert model.config.d_head == 16 and model.config.n_head == 4
    assert model.settings_guessed == ("rope_theta=10000.0", "rope_scaling=none", "ln_eps=1e-06",
                                      "activation=silu", "sliding_window=none", "n_ctx=32768")
    assert len(model.warnings) == 1 and "settings guessed: rope_theta=10000.0" in model.warnings[0]
    # the fixture happens to use those defaults: the guessed numbers are HF's here
    reference = load_reference(HF_OUTPUTS / "qwen3_tiny.npz")
    assert_trace_matches(model.trace(str(reference["text_0"])), reference, 0, "qwen3 lone")


def test_with_config_json_nothing_is_guessed(fixtures_dir):
    model = load_model(fixtures_dir / "phi4_mini_tiny")
    assert model.settings_guessed == () and model.warnings == []
