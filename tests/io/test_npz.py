"""The project's .npz: read with allow_pickle=False, only the members the model uses, every
broken archive reported in one line naming the file and the member."""
import json
import zipfile

import numpy as np
import pytest

from tests.builders import model_error, random_params, tiny_config, wordpiece_tokenizer, write_npz_model
from transformer_stepper import load_model
from transformer_stepper.io import npz_format


@pytest.fixture
def config():
    return tiny_config("sinusoidal")


@pytest.fixture
def good(tmp_path, config):
    return write_npz_model(tmp_path / "m.npz", config, random_params(config), wordpiece_tokenizer())


def _rewrite(path, **changes):
    with np.load(path, allow_pickle=False) as archive:
        members = {name: archive[name] for name in archive.files}
    members.update(changes)
    for name in [n for n, v in members.items() if v is None]:
        del members[name]
    np.savez(path, **members)


def test_round_trip(good, config):
    model = load_model(good)
    assert model.config == config.replace(name="m")
    for name, value in random_params(config).items():
        assert model.params[name].tobytes() == value.tobytes()
        assert not model.params[name].flags.writeable


def test_not_a_zip(tmp_path):
    path = tmp_path / "m.npz"
    path.write_text("hello")
    assert model_error(load_model, path) == f"{path}: not an .npz (it is not a zip archive)"


def test_a_single_npy(tmp_path):
    path = tmp_path / "m.npz"
    with open(path, "wb") as handle:
        np.save(handle, np.ones(3))
    assert model_error(load_model, path) == f"{path}: a single .npy array, not a model .npz"


def test_truncated_archive(good):
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 2])
    assert model_error(load_model, good) == f"{good}: not a readable .npz (File is not a zip file)"


def test_corrupt_member(good):
    with zipfile.ZipFile(good) as archive:
        info = archive.getinfo("wte.npy")
    data = bytearray(good.read_bytes())
    at = info.header_offset + 200  # inside wte's data, past its local header
    data[at:at + 8] = b"\xff" * 8
    good.write_bytes(bytes(data))
    assert model_error(load_model, good) == f"{good}: member wte is corrupt (Bad CRC-32 for file 'wte.npy')"


def test_zip_without_config(tmp_path):
    path = tmp_path / "m.npz"
    np.savez(path, wte=np.ones((2, 2), np.float32))
    assert model_error(load_model, path) == f"{path}: no __config__ entry (not a Transformer Stepper .npz)"


@pytest.mark.parametrize("value, message", [
    (np.array("{oops"), "__config__ is not valid JSON (Expecting property name enclosed in double quotes: "
                        "line 1 column 2 (char 1))"),
    (np.array("[1, 2]"), "__config__: the model config must be a JSON object, got list"),
    (np.array("5"), "__config__: the model config must be a JSON object, got int"),
    (np.array(["{}"]), "member __config__ must be a 0-d unicode array, got <U2 (1,)"),
    (np.array(3.0), "member __config__ must be a 0-d unicode array, got float64 ()"),
    (np.array('{"n_vocab": 4}'), "__config__: bad model config (ModelConfig.__init__() missing 6 required "
                                 "positional arguments: 'family', 'n_ctx', 'd_model', 'n_head', 'n_layer', and 'd_ff')"),
])
def test_bad_config_member(good, value, message):
    _rewrite(good, __config__=value)
    assert model_error(load_model, good) == f"{good}: {message}"


def test_config_values_rejected_by_model_config(good, config):
    _rewrite(good, __config__=np.array(json.dumps(config.to_dict() | {"n_head": 5})))
    assert model_error(load_model, good) == f"{good}: __config__: d_model=24 is not divisible by n_head=5"
    _rewrite(good, __config__=np.array(json.dumps(config.to_dict() | {"causal": "yes"})))
    assert model_error(load_model, good) == f"{good}: __config__: causal must be true or false, got 'yes'"


def test_bad_embedded_tokenizer(good):
    _rewrite(good, __tokenizer__=np.array("{nope"))
    assert model_error(load_model, good) == (
        f"{good} (embedded tokenizer): not a valid tokenizer (key must be a string at line 1 column 2)")


def test_integer_tensor(good):
    _rewrite(good, wte=np.ones((4, 4), np.int64))
    assert model_error(load_model, good) == f"{good}: tensor wte has dtype int64, expected float"


def test_missing_and_misshapen_tensors(good, config):
    _rewrite(good, **{"h.2.mlp.fc.b": None})
    assert model_error(load_model, good) == f"{good}: missing tensor h.2.mlp.fc.b"
    _rewrite(good, **{"h.2.mlp.fc.b": np.zeros(5, np.float32)})
    assert model_error(load_model, good) == f"{good}: tensor h.2.mlp.fc.b has shape (5,), expected (48,)"


def test_float64_and_float16_members_become_float32(good, config):
    params = random_params(config)
    _rewrite(good, wte=params["wte"].astype(np.float64), **{"h.0.attn.q.w": params["h.0.attn.q.w"].astype(np.float16)})
    model = load_model(good)
    assert model.params["wte"].dtype == np.float32 and model.params["h.0.attn.q.w"].dtype == np.float32
    np.testing.assert_array_equal(model.params["wte"], params["wte"])


def test_unused_members_are_never_read(good, monkeypatch):
    junk = np.empty(2, dtype=object)  # would raise if read without pickle
    _rewrite(good, **{"h.99.unused": np.zeros(3, np.float32)})
    with np.load(good, allow_pickle=False) as archive:
        members = {name: archive[name] for name in archive.files}
    np.savez(good, **members, junk=junk)
    read = []
    real = npz_format._member

    def spy(archive, name, path):
        read.append(name)
        return real(archive, name, path)

    monkeypatch.setattr(npz_format, "_member", spy)
    model = load_model(good)
    assert "junk" not in read and "h.99.unused" not in read
    assert set(read) == set(model.params) | {"__config__", "__tokenizer__"}
