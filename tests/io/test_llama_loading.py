"""Llama-family checkpoints open from HF folders, sharded bf16 folders and lone .safetensors,
lazily (nothing read at open), and every bad config or tensor gets one line naming it."""
import json

import numpy as np
import pytest

from tests.builders import (bytelevel_tokenizer, edit_config, llama_checkpoint, llama_config_json,
                            llama_folder, model_error, vocab_size, write_folder)
from transformer_stepper import load_model
from transformer_stepper.io import safetensors_file


def test_llama_folder_opens_with_its_config(tmp_path):
    model = load_model(llama_folder(tmp_path / "m"))
    c = model.config
    assert (c.family, c.position, c.norm_kind, c.gated_mlp, c.n_kv_heads, c.tied_head) == \
        ("llama", "rotary", "rms", True, 2, False)
    trace = model.trace("the bank of the river")
    assert trace.logits.shape == (trace.n_seq, c.n_vocab)
    assert trace.layer("k", 0).shape == (4, trace.n_seq, 8)


def test_nothing_is_read_at_open_and_bf16_weights_are_widened_on_use(tmp_path, monkeypatch):
    reads = []
    real = safetensors_file.SafetensorsFile.get
    monkeypatch.setattr(safetensors_file.SafetensorsFile, "get",
                        lambda self, name: reads.append(name) or real(self, name))
    model = load_model(llama_folder(tmp_path / "m", dtype="BF16", shards=2))
    assert reads == []
    assert model.params.nbytes_widened() == 0
    model.trace("the bank")
    assert "model.layers.1.mlp.down_proj.weight" in reads
    assert "model.embed_tokens.weight" not in reads, "the lookup gathers rows, not the table"
    assert model.params.nbytes_widened() > 0


def test_the_weight_cache_keeps_within_its_budget_and_results_do_not_change(tmp_path):
    folder = llama_folder(tmp_path / "m", dtype="BF16")
    roomy = load_model(folder).trace("the bank of the river").hidden_states
    tight = load_model(folder)
    tight.params.budget = 10_000            # bytes: a few tensors at most
    for _ in range(2):
        np.testing.assert_array_equal(tight.trace("the bank of the river").hidden_states, roomy)
        largest = max(np.prod(s) * 4 for s in tight.params.shapes.values())
        assert tight.params.nbytes_widened() <= max(10_000, largest)


def test_a_sweep_over_the_layers_keeps_what_fits_instead_of_thrashing(tmp_path, monkeypatch):
    # each pass reads the layers in order: the cache keeps the first tensors that fit (not the
    # last ones read, which the next pass needs last), so a second pass re-reads fewer
    folder = llama_folder(tmp_path / "m", dtype="BF16", n_layer=4)
    model = load_model(folder)
    model.trace("the bank of the river")
    whole = model.params.nbytes_widened()
    model.params.set_budget(whole // 2)
    reads = []
    real = safetensors_file.SafetensorsFile.get
    monkeypatch.setattr(safetensors_file.SafetensorsFile, "get",
                        lambda self, name: reads.append(name) or real(self, name))
    model.trace("the bank of the river")
    first = len(reads)
    reads.clear()
    model.trace("the bank of the river")
    assert 0 < len(reads) <= first
    assert "model.layers.0.self_attn.q_proj.weight" not in reads, "the first layer stayed"
    assert model.params.nbytes_widened() <= whole // 2 + max(np.prod(s) * 4 for s in model.params.shapes.values())


def test_lone_safetensors_is_recognised_as_llama(tmp_path):
    folder = llama_folder(tmp_path / "m", d_model=128, n_head=2, n_kv=1, d_ff=64)
    (folder / "config.json").unlink()
    model = load_model(folder / "model.safetensors")
    assert model.config.family == "llama" and model.config.n_head == 2
    assert model.config.n_kv_heads == 1 and not model.config.tied_head
    assert any("n_head=2 (heads of 64 assumed)" in w for w in model.warnings)
    assert model.settings_guessed == ("n_head=2 (heads of 64 assumed)", "rope_theta=10000.0",
                                      "rope_scaling=none", "ln_eps=1e-06", "activation=silu",
                                      "sliding_window=none", "n_ctx=2048")


@pytest.mark.parametrize("changes, message", [
    ({"num_key_value_heads": 3}, "num_attention_heads=4 is not divisible by num_key_value_heads=3"),
    ({"rope_scaling": {"rope_type": "mrope", "factor": 4.0}},
     "unsupported rope_scaling type 'mrope' (supported: linear, llama3, dynamic, yarn, longrope)"),
    ({"rope_scaling": {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}},
     "rope_scaling short_factor must be a list of 4 numbers (one per rotated pair)"),
    ({"partial_rotary_factor": 0.1}, "partial_rotary_factor=0.1 rotates 0 of 8 dims"),
    ({"partial_rotary_factor": 0.5}, "partial_rotary_factor=0.5 is not supported for llama (only 1.0)"),
    ({"head_dim": 7}, "head_dim=7 must be even for rotary positions"),
    ({"hidden_act": "mish"}, "unsupported hidden_act 'mish'"),
])
def test_bad_llama_configs_get_one_line(tmp_path, changes, message):
    folder = llama_folder(tmp_path / "m")
    edit_config(folder, **changes)
    error = model_error(load_model, folder)
    assert error.startswith(f"{folder / 'config.json'}: ") and message in error and "\n" not in error


def test_misshapen_and_missing_tensors_are_named(tmp_path):
    folder = llama_folder(tmp_path / "m")
    edit_config(folder, num_key_value_heads=4)
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors'}: tensor model.layers.0.self_attn.k_proj.weight has shape "
        f"(16, 32), expected (32, 32) (d_model=32, n_vocab={json.loads((folder / 'config.json').read_text())['vocab_size']}, "
        f"n_ctx=128, d_ff=48)")
    tensors = llama_checkpoint(vocab_size(bytelevel_tokenizer()))
    del tensors["model.layers.1.mlp.up_proj.weight"]
    folder = write_folder(tmp_path / "n", tensors, llama_config_json(vocab_size(bytelevel_tokenizer())),
                          bytelevel_tokenizer())
    assert model_error(load_model, folder) == \
        f"{folder / 'model.safetensors'}: missing tensor model.layers.1.mlp.up_proj.weight"


def test_a_base_model_without_head_has_no_logits(tmp_path):
    model = load_model(llama_folder(tmp_path / "m", lm_head=False))
    assert model.config.lm_head is False and model.trace("the bank").logits is None


def test_an_empty_gguf_is_refused_in_one_line(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(64))
    message = model_error(load_model, path)
    assert message == f"{path}: GGUF metadata has no 'general.architecture'"
