"""Pickle-based weights are refused without being unpickled: a pickle that would create a
marker file when loaded is offered in every form, and the marker never appears."""
import json
import pickle
import zipfile

import numpy as np
import pytest

from tests.builders import bert_config_json, model_error, wordpiece_tokenizer, wordpiece_vocab
from transformer_stepper import load_model
from transformer_stepper.io.loader import CONVERT_HINT


class _Payload:
    """Unpickling this runs open(marker, "w"): the classic pickle attack, made harmless."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def _evil_pickle(marker) -> bytes:
    return pickle.dumps({"embeddings.word_embeddings.weight": _Payload(marker)})


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "UNPICKLED"


@pytest.fixture(autouse=True)
def no_unpickling(monkeypatch):
    """Belt and braces: any attempt to unpickle fails the test outright."""
    def refuse(*args, **kwargs):
        raise AssertionError("something tried to unpickle")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)


def test_the_payload_is_live(tmp_path):
    # proves the marker test can fail: the real unpickler does run the payload
    probe = tmp_path / "probe"
    pickle._loads(_evil_pickle(probe))
    assert probe.exists()


@pytest.mark.parametrize("suffix", [".bin", ".pt", ".pth", ".ckpt", ".BIN", ".pkl"])
def test_lone_pickle_file_is_refused_unopened(tmp_path, marker, suffix):
    path = tmp_path / f"pytorch_model{suffix}"
    path.write_bytes(_evil_pickle(marker))
    assert model_error(load_model, path) == (
        f"{path}: pickle-based weights are never opened (they can run code); {CONVERT_HINT}")
    assert not marker.exists()


def test_torch_zip_format_is_refused_too(tmp_path, marker):
    # torch.save's default: a zip holding data.pkl
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", _evil_pickle(marker))
    assert "pickle-based weights are never opened" in model_error(load_model, path)
    assert not marker.exists()


def test_folder_with_only_pytorch_model_bin_gives_the_conversion_hint(tmp_path, marker):
    (tmp_path / "config.json").write_text(json.dumps(bert_config_json(len(wordpiece_vocab()))))
    wordpiece_tokenizer().save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "pytorch_model.bin").write_bytes(_evil_pickle(marker))
    message = model_error(load_model, tmp_path)
    assert message == (f"{tmp_path / 'pytorch_model.bin'}: pickle-based weights are never opened "
                       f"(they can run code); convert it to safetensors with transformers: "
                       f"AutoModel.from_pretrained(DIR).save_pretrained(OUT, safe_serialization=True)")
    assert not marker.exists()


def test_npz_that_is_really_a_pickle(tmp_path, marker):
    path = tmp_path / "model.npz"
    path.write_bytes(_evil_pickle(marker))
    assert model_error(load_model, path) == (
        f"{path}: a pickle, not an .npz; pickles are never opened (they can run code)")
    assert not marker.exists()


def test_npz_with_an_object_array_is_refused(tmp_path, marker):
    path = tmp_path / "model.npz"
    config = {"family": "bert", "n_vocab": 4, "n_ctx": 4, "d_model": 4, "n_head": 1, "n_layer": 1, "d_ff": 4}
    payload = np.empty(1, dtype=object)
    payload[0] = _Payload(marker)
    np.savez(path, __config__=np.array(json.dumps(config)), wte=payload)
    assert model_error(load_model, path) == (
        f"{path}: member wte is an object array, which would need pickle (refused)")
    assert not marker.exists()


def test_npz_with_an_object_config_is_refused(tmp_path, marker):
    path = tmp_path / "model.npz"
    payload = np.empty((), dtype=object)
    payload[()] = _Payload(marker)
    np.savez(path, __config__=payload)
    assert model_error(load_model, path) == (
        f"{path}: member __config__ is an object array, which would need pickle (refused)")
    assert not marker.exists()


def test_safetensors_that_is_really_a_pickle(tmp_path, marker):
    path = tmp_path / "model.safetensors"
    path.write_bytes(_evil_pickle(marker))
    assert model_error(load_model, path).startswith(f"{path}: not a safetensors file (header length ")
    assert not marker.exists()
