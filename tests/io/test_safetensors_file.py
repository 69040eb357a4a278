"""The safetensors reader: every kind of broken file gives one line naming file and tensor;
good files read lazily, float32 memory-mapped, float16/bfloat16 widened exactly."""
import mmap
import struct

import numpy as np
import pytest

from tests.builders import bf16_round, model_error, write_raw_safetensors, write_safetensors
from transformer_stepper.io.safetensors_file import SafetensorsFile, bf16_to_f32


def _mapped(a: np.ndarray) -> bool:
    """True when `a` is a view of a memory-mapped file (its base chain ends in an mmap)."""
    while isinstance(a, np.ndarray):
        if isinstance(a, np.memmap) and isinstance(a._mmap, mmap.mmap):
            return True
        a = a.base
    return isinstance(a, mmap.mmap)


@pytest.fixture
def good(tmp_path):
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, np.float32)}
    return write_safetensors(tmp_path / "good.safetensors", tensors), tensors


# ----------------------------------------------------------------------------------- broken
def test_file_shorter_than_the_length_prefix(tmp_path):
    path = tmp_path / "short.safetensors"
    path.write_bytes(b"abc")
    assert model_error(SafetensorsFile, path) == f"{path}: not a safetensors file (only 3 bytes)"


def test_empty_file(tmp_path):
    path = tmp_path / "empty.safetensors"
    path.write_bytes(b"")
    assert model_error(SafetensorsFile, path) == f"{path}: not a safetensors file (only 0 bytes)"


def test_header_length_larger_than_the_file(tmp_path):
    path = tmp_path / "long.safetensors"
    path.write_bytes(struct.pack("<Q", 1000) + b"{}" + b" " * 10)
    assert model_error(SafetensorsFile, path) == (
        f"{path}: not a safetensors file (header length 1000 does not fit in 20 bytes)")


def test_absurd_header_length_is_refused_before_reading(tmp_path):
    path = tmp_path / "absurd.safetensors"
    path.write_bytes(struct.pack("<Q", 2**63) + b"{}")
    assert "header length 9223372036854775808 does not fit in 10 bytes" in model_error(SafetensorsFile, path)


@pytest.mark.parametrize("header, why", [
    (b"\x00\x01garbage\xff\xfe", "corrupt safetensors header ("),
    (b"not json at all", "corrupt safetensors header (Expecting value"),
    (b"[1, 2, 3]", "corrupt safetensors header (not a JSON object)"),
    (b"\xff\xfe\xfd\xfc", "corrupt safetensors header (not UTF-8 text)"),
    (b"[" * 100_000 + b"]" * 100_000, "corrupt safetensors header ("),  # nesting too deep
    (b"", "corrupt safetensors header (Expecting value"),
])
def test_garbage_header(tmp_path, header, why):
    path = tmp_path / "garbage.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    assert model_error(SafetensorsFile, path).startswith(f"{path}: {why}")


def test_random_bytes_are_not_a_safetensors_file(tmp_path):
    path = tmp_path / "noise.safetensors"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    assert model_error(SafetensorsFile, path).startswith(f"{path}: not a safetensors file (header length ")


def test_truncated_file_names_the_tensor_that_no_longer_fits(good):
    path, _ = good
    data = path.read_bytes()
    path.write_bytes(data[:-5])  # tensors are stored in name order: "b" is last
    header_len = struct.unpack("<Q", data[:8])[0]
    data_len = len(data) - 5 - 8 - header_len
    assert model_error(SafetensorsFile, path) == (
        f"{path}: tensor b has data_offsets [24, 40] outside the {data_len} data bytes (file truncated?)")


def test_truncated_inside_the_header(good):
    path, _ = good
    data = path.read_bytes()
    path.write_bytes(data[:20])
    header_len = struct.unpack("<Q", data[:8])[0]
    assert model_error(SafetensorsFile, path) == (
        f"{path}: not a safetensors file (header length {header_len} does not fit in 20 bytes)")


@pytest.mark.parametrize("offsets", [[0, 64], [-4, 12], [8, 4], [100, 116]])
def test_offsets_out_of_range(tmp_path, offsets):
    path = write_raw_safetensors(tmp_path / "x.safetensors",
                                 {"w": {"dtype": "F32", "shape": [4], "data_offsets": offsets}}, bytes(16))
    message = model_error(SafetensorsFile, path)
    assert message == (f"{path}: tensor w has data_offsets [{offsets[0]}, {offsets[1]}] outside "
                       f"the 16 data bytes (file truncated?)")


def test_byte_length_that_does_not_match_dtype_and_shape(tmp_path):
    path = write_raw_safetensors(tmp_path / "x.safetensors",
                                 {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}}, bytes(16))
    assert model_error(SafetensorsFile, path) == (
        f"{path}: tensor w has 12 data bytes, but F32 (2, 2) needs 16")


@pytest.mark.parametrize("entry, why", [
    ("oops", "not an object"),
    ({"shape": [4], "data_offsets": [0, 16]}, "dtype None"),
    ({"dtype": ["F32"], "shape": [4], "data_offsets": [0, 16]}, "dtype ['F32']"),
    ({"dtype": "F32", "shape": "4", "data_offsets": [0, 16]}, "shape '4'"),
    ({"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}, "shape [-4]"),
    ({"dtype": "F32", "shape": [4.0], "data_offsets": [0, 16]}, "shape [4.0]"),
    ({"dtype": "F32", "shape": [4], "data_offsets": ["0", "16"]}, "data_offsets ['0', '16']"),
    ({"dtype": "F32", "shape": [4], "data_offsets": [0]}, "data_offsets [0]"),
    ({"dtype": "F32", "shape": [4]}, "data_offsets None"),
])
def test_malformed_header_entry(tmp_path, entry, why):
    path = write_raw_safetensors(tmp_path / "x.safetensors", {"w": entry}, bytes(16))
    assert model_error(SafetensorsFile, path) == f"{path}: tensor w has a malformed header entry ({why})"


def test_metadata_that_is_not_an_object(tmp_path):
    path = write_raw_safetensors(tmp_path / "x.safetensors", {"__metadata__": [1]}, b"")
    assert model_error(SafetensorsFile, path) == (
        f"{path}: corrupt safetensors header (__metadata__ is not an object)")


def test_metadata_values_that_are_not_strings_are_ignored(tmp_path):
    path = write_raw_safetensors(tmp_path / "x.safetensors",
                                 {"__metadata__": {"format": "pt", "config": {"a": 1}}}, b"")
    assert SafetensorsFile(path).metadata == {"format": "pt"}


def test_unsupported_dtype_is_an_error_only_when_read(tmp_path):
    tensors = {"ids": np.arange(4, dtype=np.int64), "w": np.ones(3, np.float32)}
    path = write_safetensors(tmp_path / "x.safetensors", tensors)
    f = SafetensorsFile(path)
    assert f.dtype("ids") == "I64"
    assert model_error(f.get, "ids") == (
        f"{path}: tensor ids has unsupported dtype I64 (F32, F16 and BF16 are read)")
    np.testing.assert_array_equal(f.get("w"), np.ones(3, np.float32))


def test_unknown_and_float8_dtypes_do_not_stop_the_file_from_opening(tmp_path):
    header = {"f8": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]},
              "f4": {"dtype": "F4", "shape": [8], "data_offsets": [4, 8]},
              "w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}
    data = bytes(8) + np.array([1.5, -2], np.float32).tobytes()
    f = SafetensorsFile(write_raw_safetensors(tmp_path / "x.safetensors", header, data))
    np.testing.assert_array_equal(f.get("w"), [1.5, -2])
    assert "unsupported dtype F8_E4M3" in model_error(f.get, "f8")
    assert "unsupported dtype F4" in model_error(f.get, "f4")


# ----------------------------------------------------------------------------------- good
def test_float32_reads_as_a_read_only_memory_map(good):
    path, tensors = good
    f = SafetensorsFile(path)
    assert set(f.keys()) == {"a", "b"} and f.shape("a") == (2, 3)
    a = f.get("a")
    assert a.dtype == np.float32 and _mapped(a) and not a.flags.writeable
    np.testing.assert_array_equal(a, tensors["a"])
    with pytest.raises(ValueError):
        a[0, 0] = 1


def test_float16_and_bfloat16_widen_exactly_and_read_only(tmp_path):
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((5, 7)) * 100).astype(np.float32)
    w.flat[:4] = [np.inf, -np.inf, 0.0, -0.0]
    f16 = SafetensorsFile(write_safetensors(tmp_path / "h.safetensors", {"w": w}, dtype="F16"))
    bf16 = SafetensorsFile(write_safetensors(tmp_path / "b.safetensors", {"w": w}, dtype="BF16"))
    for f, expected in ((f16, w.astype(np.float16).astype(np.float32)), (bf16, bf16_round(w))):
        got = f.get("w")
        assert got.dtype == np.float32 and not got.flags.writeable and not _mapped(got)
        assert got.tobytes() == expected.tobytes()  # bit for bit, signed zero included


def test_bf16_bits_are_the_top_half_of_float32():
    bits = np.array([0x3F80, 0xC000, 0x7F80, 0x0001], dtype=np.uint16)
    np.testing.assert_array_equal(bf16_to_f32(bits), [1.0, -2.0, np.inf, 2.0**-133])


def test_file_with_no_tensors(tmp_path):
    path = write_raw_safetensors(tmp_path / "none.safetensors", {"__metadata__": {"format": "pt"}}, b"")
    f = SafetensorsFile(path)
    assert list(f.keys()) == [] and f.metadata == {"format": "pt"}


def test_zero_sized_tensor(tmp_path):
    path = write_safetensors(tmp_path / "z.safetensors", {"z": np.zeros((0, 3), np.float32)})
    assert SafetensorsFile(path).get("z").shape == (0, 3)


def test_unaligned_data_still_reads(tmp_path):
    w = np.arange(5, dtype=np.float32)
    path = write_raw_safetensors(tmp_path / "odd.safetensors",
                                 {"w": {"dtype": "F32", "shape": [5], "data_offsets": [1, 21]}},
                                 b"\x00" + w.tobytes(), pad_to=1)
    np.testing.assert_array_equal(SafetensorsFile(path).get("w"), w)


def test_file_shrinking_after_the_header_was_read(good):
    path, _ = good
    f = SafetensorsFile(path)
    path.write_bytes(path.read_bytes()[:-8])
    # a read of the shrunk map would end the process (SIGBUS): refused before it
    assert model_error(f.get, "b") == f"{path}: the file changed on disk; reopen it"


def test_header_length_over_the_format_limit(tmp_path):
    path = tmp_path / "big.safetensors"
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", 100 * 1024 * 1024 + 1))
        handle.truncate(8 + 100 * 1024 * 1024 + 16)  # sparse: the length fits in the file
    assert model_error(SafetensorsFile, path) == (
        f"{path}: not a safetensors file (header length 104857601 is over the format's limit of 104857600)")
