"""Read .safetensors lazily: parse the header ourselves and memory-map the data.

Why not `safetensors.numpy.load_file`: it reads every tensor eagerly and cannot return
bfloat16. Here a tensor is only touched when the model reads it, float32 tensors stay
memory-mapped, and float16/bfloat16 are widened to float32 on access. A tensor of a dtype
we cannot read (int8, float8 ...) is only an error if the model asks for it."""
from __future__ import annotations

import json
import math
import os
import stat
import struct
from pathlib import Path
from typing import Optional

import numpy as np

from ..core.model.errors import ModelError

# dtypes we can turn into float32 (bfloat16 is read as raw uint16 bits, then shifted)
_READABLE = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
             "F64": np.dtype("<f8")}
# bytes per element of every dtype the safetensors format defines, to check the header's
# byte ranges even for tensors we never read; sub-byte types (F4, F6_*) are left unchecked
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
             "F8_E8M0": 1, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4,
             "U16": 2, "U8": 1, "BOOL": 1, "C64": 8}
_MAX_HEADER = 100 * 1024 * 1024  # the format's own limit
_MAX_DIM = 1 << 62               # a dimension numpy can hold (a shape entry of 2**63 overflows)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    # bfloat16 is the top half of a float32: shift the bits into place (one pass, in C order)
    out = np.empty(raw.shape, dtype=np.uint32)
    np.left_shift(raw, 16, out=out, dtype=np.uint32)
    return out.view(np.float32)


def file_identity(path: Path) -> tuple[int, int, int, int]:
    """(device, inode, size, mtime in ns) of a regular file; a FIFO, device or folder is refused
    before anything opens it (opening a FIFO waits for a writer forever)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelError(f"{path}: not a regular file (a {_kind(info.st_mode)}); only regular files are "
                         f"opened")
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"), (stat.S_ISDIR, "folder")):
        if test(mode):
            return name
    return "special file"


def open_regular(path: Path):
    """A binary handle on a regular file, never blocking: O_NONBLOCK so that a path swapped for
    a FIFO between the check and the open does not wait, and checked again once open."""
    file_identity(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ModelError(f"{path}: not a regular file; only regular files are opened")
    return os.fdopen(fd, "rb")


class FileChanged(ModelError):
    """A mapped weights file is no longer the one that was opened."""


def check_unchanged(path: Path, identity: tuple[int, int, int, int]) -> None:
    """The file is still the one opened (device, inode, size, mtime as file_identity gave at
    open): a mapped file that was truncated would kill the process with SIGBUS on the next
    read, and one rewritten in place would give another model's numbers. -> FileChanged."""
    try:
        now = file_identity(path)
    except ModelError:
        now = None
    if now != identity:
        raise FileChanged(f"{path}: the file changed on disk; reopen it")


def _read_header(path: Path) -> tuple[dict, int, int]:
    """-> (header object, header length, file size), or a ModelError naming the file."""
    try:
        size = file_identity(path)[2]
        with open_regular(path) as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise ModelError(f"{path}: not a safetensors file (only {size} bytes)")
            (header_len,) = struct.unpack("<Q", prefix)
            if _MAX_HEADER < header_len <= size - 8:
                raise ModelError(f"{path}: not a safetensors file (header length {header_len} "
                                 f"is over the format's limit of {_MAX_HEADER})")
            if header_len > size - 8:
                raise ModelError(f"{path}: not a safetensors file (header length "
                                 f"{header_len} does not fit in {size} bytes)")
            header_bytes = handle.read(header_len)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        header = json.loads(header_bytes.decode("utf-8"), object_pairs_hook=_unique_keys)
    except _Repeated as exc:
        raise ModelError(f"{path}: tensor {exc.args[0]} is named twice in the header (refused: "
                         f"one name would hide the other's bytes)") from None
    except UnicodeDecodeError:  # its message would quote the file's bytes
        raise ModelError(f"{path}: corrupt safetensors header (not UTF-8 text)") from None
    except (ValueError, RecursionError) as exc:
        raise ModelError(f"{path}: corrupt safetensors header ({exc})") from None
    if not isinstance(header, dict):
        raise ModelError(f"{path}: corrupt safetensors header (not a JSON object)")
    return header, header_len, size


class _Repeated(Exception):
    pass


def _unique_keys(pairs: list) -> dict:
    # json.loads keeps the last of two equal keys silently: a repeated tensor name is refused
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise _Repeated(key)
        seen[key] = value
    return seen


def _check_overlaps(path: Path, entries: dict) -> None:
    """No two tensors may share bytes: one weight would silently read another's."""
    spans = sorted((start, end, name) for name, (_, _, start, end) in entries.items() if end > start)
    for (_, end_a, name_a), (start_b, _, name_b) in zip(spans, spans[1:]):
        if start_b < end_a:
            raise ModelError(f"{path}: tensors {name_a} and {name_b} overlap in the file "
                             f"(data_offsets alias the same bytes; refused)")


def _parse_entry(path: Path, name: str, info, data_len: int) -> tuple[str, tuple[int, ...], int, int]:
    # one header entry -> (dtype, shape, start, end), with every field checked
    def bad(why: str) -> ModelError:
        return ModelError(f"{path}: tensor {name} has a malformed header entry ({why})")

    if not isinstance(info, dict):
        raise bad("not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str):
        raise bad(f"dtype {dtype!r}")
    if not isinstance(shape, list) or not all(type(s) is int and 0 <= s < _MAX_DIM for s in shape):
        raise bad(f"shape {_short(shape)}")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(type(o) is int for o in offsets)):
        raise bad(f"data_offsets {offsets!r}")
    start, end = offsets
    if not 0 <= start <= end <= data_len:
        raise ModelError(f"{path}: tensor {name} has data_offsets [{start}, {end}] outside the "
                         f"{data_len} data bytes (file truncated?)")
    itemsize = _ITEMSIZE.get(dtype)
    if itemsize is not None:
        expected = math.prod(shape) * itemsize     # Python ints: no int64 overflow
        if end - start != expected:
            raise ModelError(f"{path}: tensor {name} has {end - start} data bytes, but {dtype} "
                             f"{tuple(shape)} needs {expected}")
    return dtype, tuple(shape), start, end


class SafetensorsFile:
    """name -> float32 array on demand; `entries` holds (dtype, shape, start, end) without
    reading any tensor data."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        header, header_len, size = _read_header(self.path)
        metadata = header.pop("__metadata__", None) or {}
        if not isinstance(metadata, dict):
            raise ModelError(f"{self.path}: corrupt safetensors header (__metadata__ is not an object)")
        # the format says str -> str; anything else is ignored rather than trusted
        self.metadata = {k: v for k, v in metadata.items() if isinstance(v, str)}
        self._data_start = 8 + header_len
        data_len = size - self._data_start
        self.entries: dict[str, tuple[str, tuple[int, ...], int, int]] = {
            name: _parse_entry(self.path, name, info, data_len) for name, info in header.items()}
        _check_overlaps(self.path, self.entries)
        self._map: Optional[np.ndarray] = None
        self.identity = file_identity(self.path)

    def check_unchanged(self) -> None:
        check_unchanged(self.path, self.identity)

    def keys(self):
        return self.entries.keys()

    def shape(self, name: str) -> tuple[int, ...]:
        return self.entries[name][1]

    def dtype(self, name: str) -> str:
        return self.entries[name][0]

    def _data(self) -> np.ndarray:
        # the data area as read-only bytes, memory-mapped on first use
        if self._map is None:
            self.check_unchanged()
            try:
                if self.path.stat().st_size <= self._data_start:
                    self._map = np.zeros(0, dtype=np.uint8)
                else:
                    # a plain ndarray view of the mapping: numpy's memmap subclass runs Python
                    # (__array_wrap__/__array_finalize__) on every product with a weight
                    self._map = np.memmap(self.path, dtype=np.uint8, mode="r",
                                          offset=self._data_start).view(np.ndarray)
            except (OSError, ValueError) as exc:
                raise ModelError(f"{self.path}: cannot map the file ({exc})") from None
        return self._map

    def check_readable(self, name: str) -> None:
        """A tensor the model will read has a dtype we widen and lies inside the file (checked
        at open, so a lazy read later does not fail)."""
        dtype, shape, start, end = self.entries[name]
        if dtype not in _READABLE:
            raise ModelError(f"{self.path}: tensor {name} has unsupported dtype {dtype} "
                             f"(F32, F16 and BF16 are read)")
        if end > len(self._data()):  # the file shrank since its header was read
            raise ModelError(f"{self.path}: tensor {name} lies past the end of the file (file truncated?)")

    def _raw(self, name: str) -> tuple[np.ndarray, str]:
        # the tensor's bytes as an array of its stored dtype (bf16 as uint16 bits), mapped
        self.check_unchanged()
        self.check_readable(name)
        dtype, shape, start, end = self.entries[name]
        data = self._data()
        return data[start:end].view(_READABLE[dtype]).reshape(shape), dtype

    @staticmethod
    def _widen(raw: np.ndarray, dtype: str) -> np.ndarray:
        if dtype == "F32":
            return raw
        value = bf16_to_f32(raw) if dtype == "BF16" else raw.astype(np.float32)
        value.flags.writeable = False
        return value

    def get(self, name: str) -> np.ndarray:
        """The tensor as a read-only float32 array: a view of the file for F32, a copy else."""
        return self._widen(*self._raw(name))  # F32: memory-mapped, read-only (mode "r")

    def rows(self, name: str, index) -> np.ndarray:
        """Rows `index` (an index array or a slice) of a tensor as float32, widening only them."""
        raw, dtype = self._raw(name)
        return self._widen(raw[index], dtype)

    def is_float32(self, name: str) -> bool:
        return self.entries[name][0] == "F32"
