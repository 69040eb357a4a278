"""Encoder–decoder folders: what a user can get wrong, one line each, and the T5 head variants."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.loader import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _copy(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    return folder


def test_config_says_encoder_decoder_but_no_decoder_weights(tmp_path):
    folder = _copy("bart_tiny", tmp_path)
    tensors = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in tensors.items() if ".decoder." not in k}, folder / "model.safetensors")
    with pytest.raises(ModelError, match=r"model.safetensors: the config describes an encoder–decoder "
                                         r"but the file has no decoder weights") as error:
        load_model(folder)
    assert "\n" not in str(error.value)


def test_source_longer_than_the_positions_is_cut_with_a_notice():
    model = load_model(FIXTURES / "marian_tiny")           # 64 positions
    trace = model.trace("river bank " * 80)
    assert trace.encoder.n_seq == 64 and trace.encoder.truncated
    assert trace.notices == ("the source was cut to the model's 64 positions",)
    assert np.isfinite(trace.logits).all()


def test_empty_source_is_refused():
    model = load_model(FIXTURES / "t5_tiny")
    for text in ("", "   "):
        with pytest.raises(ModelError, match="^empty source: type a sentence to translate$"):
            model.trace(text)


def test_unknown_target_pieces_are_read_as_unk_and_said():
    model = load_model(FIXTURES / "t5_tiny")
    trace = model.trace("The bank of the river.", "ζζ Ufer")
    unk = model.tokenizer.token_to_id("<unk>")
    assert trace.decoder.input_ids.tolist().count(unk) == 2       # one per ζ
    assert trace.notices == ("the target has 2 piece(s) the vocabulary does not know: read as <unk>",)


def test_t5_with_its_own_lm_head_reads_it_unscaled(tmp_path):
    # Flan-T5 files carry lm_head.weight and tie_word_embeddings false: logits = h · lm_headᵀ,
    # h the decoder's last hidden state as Hugging Face computed it
    folder = _copy("t5_v11_tiny", tmp_path)
    tensors = load_file(folder / "model.safetensors")
    head = (tensors["shared.weight"][::-1] * 0.5).copy()
    save_file({**tensors, "lm_head.weight": head}, folder / "model.safetensors")
    config = json.loads((folder / "config.json").read_text())
    config.pop("scale_decoder_outputs")
    config["tie_word_embeddings"] = False                   # as flan-t5-small's config says
    (folder / "config.json").write_text(json.dumps(config))
    ref = np.load(FIXTURES / "hf_outputs" / "t5_v11_tiny.npz")
    trace = load_model(folder).trace(str(ref["source_0"]), str(ref["target_0"]))
    expected = ref["decoder_hidden_states_0"][-1] @ head.T
    np.testing.assert_allclose(trace.logits, expected, atol=1e-4, rtol=0)


def test_t5_v10_scales_the_tied_head():
    ref = np.load(FIXTURES / "hf_outputs" / "t5_tiny.npz")
    model = load_model(FIXTURES / "t5_tiny")
    assert model.config.head_scale == pytest.approx(32 ** -0.5)
    trace = model.trace(str(ref["source_0"]), str(ref["target_0"]))
    shared = np.asarray(model.params["wte"])
    np.testing.assert_allclose(trace.logits, (ref["decoder_hidden_states_0"][-1] * 32 ** -0.5) @ shared.T,
                               atol=1e-4, rtol=0)
