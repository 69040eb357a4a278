"""Tiny files that declare huge sizes (issue 25): a billion layers in a 1 KB config.json, a stray
tensor named h.100000000, an .npz member that inflates to gigabytes or declares terabytes, a
shape entry of 2**63, and every field of the project's own config checked for type and range.
Each is refused in one line before anything proportional to the declared size is allocated
(the tests run under an address-space limit where the runaway would show)."""
import json
import resource
import zipfile

import numpy as np
import pytest

from tests.builders import (edit_config, gpt2_checkpoint, gpt2_folder, model_error, random_params,
                            tiny_config, vocab_size, bytelevel_tokenizer, wordpiece_tokenizer,
                            write_npz_model, write_raw_safetensors, write_safetensors)
from transformer_stepper import load_model
from transformer_stepper.core.model.config import ModelConfig
from transformer_stepper.io.safetensors_file import SafetensorsFile


@pytest.fixture
def memory_limit():
    """At most 1.5 GiB more address space while the test runs: a runaway raises MemoryError
    (a test failure) instead of eating the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as handle:
        used = int(handle.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + (1536 << 20), hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_a_billion_layers_in_config_json(tmp_path, memory_limit):
    folder = gpt2_folder(tmp_path / "m")
    path = edit_config(folder, n_layer=1_000_000_000)
    assert model_error(load_model, folder) == (
        f"{path}: n_layer=1000000000 is over the limit of 4096 (no real model has that many)")


def test_a_stray_tensor_naming_layer_100000000(tmp_path, memory_limit):
    tensors = gpt2_checkpoint(vocab_size(bytelevel_tokenizer()))
    tensors["h.100000000.ln_1.weight"] = np.ones(32, np.float32)
    path = write_safetensors(tmp_path / "gpt2.safetensors", tensors)
    bytelevel_tokenizer().save(str(tmp_path / "tokenizer.json"))
    assert model_error(load_model, path) == (
        f"{path}: tensor h.100000000.ln_1.weight names layer 100000000, over the "
        f"limit of 4096 layers")


def test_a_shape_entry_of_2_to_the_63(tmp_path):
    path = write_raw_safetensors(tmp_path / "a.safetensors",
                                 {"a": {"dtype": "F32", "shape": [2**63, 2], "data_offsets": [0, 8]}}, bytes(8))
    assert model_error(SafetensorsFile, path) == (
        f"{path}: tensor a has a malformed header entry (shape [9223372036854775808, 2])")
    path = write_raw_safetensors(tmp_path / "b.safetensors",
                                 {"a": {"dtype": "F32", "shape": [2**40, 2**30], "data_offsets": [0, 8]}}, bytes(8))
    assert "needs 4722366482869645213696" in model_error(SafetensorsFile, path)


def _npz(tmp_path, **members):
    config = tiny_config("sinusoidal")
    return write_npz_model(tmp_path / "m.npz", config, random_params(config), wordpiece_tokenizer(), **members), config


def _replace_member(path, name, array_bytes, compress=True):
    # rewrite one member's raw .npy bytes (numpy would not write a lying header)
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    members[name + ".npy"] = array_bytes
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)


def _npy_header(shape, descr="<f4") -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)}).encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def test_npz_member_inflating_to_gigabytes_is_not_decompressed(tmp_path, memory_limit):
    path, config = _npz(tmp_path)
    # 2 GiB of zeros in a few megabytes, under the name of a real parameter, wrong shape
    shape = (1 << 19, 1024)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("_pad.npy", b"")   # keep the archive valid while we rebuild it
    with zipfile.ZipFile(path) as archive:
        members = {i.filename: archive.read(i) for i in archive.infolist() if i.filename != "wte.npy"}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
        with archive.open("wte.npy", "w", force_zip64=True) as member:
            member.write(_npy_header(shape))
            zeros = bytes(64 << 20)
            for _ in range(32):
                member.write(zeros)
    assert path.stat().st_size < 8 << 20
    message = model_error(load_model, path)
    assert message == (f"{path}: member wte would inflate {zipfile.ZipFile(path).getinfo('wte.npy').compress_size} "
                       f"stored bytes to {2 << 30} (refused: weights do not compress that much)")


def test_npz_member_declaring_4_tib(tmp_path, memory_limit):
    path, config = _npz(tmp_path)
    _replace_member(path, "wte", _npy_header((1 << 40,)) + bytes(64))
    assert model_error(load_model, path) == (
        f"{path}: member wte is truncated ({len(_npy_header((1 << 40,))) + 64} bytes stored, its "
        f"float32 (1099511627776,) needs {len(_npy_header((1 << 40,))) + 4 * (1 << 40)})")


def test_truncated_npz_member_is_not_blamed_on_pickle(tmp_path):
    path, config = _npz(tmp_path)
    good = np.zeros((config.n_vocab, config.d_model), np.float32)
    _replace_member(path, "wte", _npy_header(good.shape) + good.tobytes()[:100])
    message = model_error(load_model, path)
    assert "pickle" not in message
    header = len(_npy_header(good.shape))
    assert message == (f"{path}: member wte is truncated ({header + 100} bytes stored, its float32 "
                       f"{good.shape} needs {header + good.nbytes})")


def test_npz_member_of_wrong_shape_is_refused_from_its_header(tmp_path):
    path, config = _npz(tmp_path)
    _replace_member(path, "wte", _npy_header((3, 3)) + bytes(36))
    assert model_error(load_model, path) == (
        f"{path}: tensor wte has shape (3, 3), expected {(config.n_vocab, config.d_model)}")


def test_npz_object_member_is_refused_without_unpickling(tmp_path):
    path, _ = _npz(tmp_path)
    _replace_member(path, "wte", _npy_header((1,), descr="|O") + b"\x80\x04N.")
    assert model_error(load_model, path) == (
        f"{path}: member wte is an object array, which would need pickle (refused)")


# ------------------------------------------------------------------ the project's own config
@pytest.mark.parametrize("field, value, message", [
    ("n_ctx", True, "n_ctx must be a positive integer, got True"),
    ("n_layer", 2.0, "n_layer must be a positive integer, got 2.0"),
    ("d_model", "24", "d_model must be a positive integer, got '24'"),
    ("rope_theta", -5, "rope_theta must be a positive finite number, got -5"),
    ("rope_theta", float("nan"), "rope_theta must be a positive finite number, got nan"),
    ("rope_factor", 0, "rope_factor must be a positive finite number, got 0"),
    ("embed_scale", "1", "embed_scale must be a positive finite number, got '1'"),
    ("ln_eps", float("inf"), "ln_eps must be a non-negative finite number, got inf"),
    ("tied_head", 1, "tied_head must be true or false, got 1"),
    ("qkv_bias", "false", "qkv_bias must be true or false, got 'false'"),
    ("n_token_types", -1, "n_token_types must be a non-negative integer, got -1"),
    ("rope_original_n_ctx", 0, "rope_original_n_ctx must be a positive integer, got 0"),
    ("n_vocab", 1 << 30, "n_vocab=1073741824 is over the limit of 16777216 (no real model has that many)"),
    ("family", ["bert"], "family must be text, got ['bert']"),
    ("name", {"a": 1}, "name must be text, got {'a': 1}"),
])
def test_every_config_field_is_type_and_range_checked(tmp_path, field, value, message):
    config = tiny_config("sinusoidal")
    fields = config.to_dict() | {field: value}
    path = tmp_path / "m.npz"
    np.savez(path, __config__=np.array(json.dumps(fields)))
    assert model_error(load_model, path) == f"{path}: __config__: {message}"
    with pytest.raises(Exception) as raised:
        ModelConfig(**fields)
    assert str(raised.value) == f"config: {message}"


@pytest.mark.parametrize("model_type", [["bert"], {"a": 1}])
def test_model_type_that_is_not_text(tmp_path, model_type):
    folder = gpt2_folder(tmp_path / "m")
    path = edit_config(folder, model_type=model_type)
    assert model_error(load_model, folder) == f"{path}: model_type must be text, got {model_type!r}"
