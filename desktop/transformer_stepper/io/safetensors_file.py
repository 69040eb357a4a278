"""Read .safetensors lazily: parse the header ourselves and memory-map the data.

Why not `safetensors.numpy.load_file`: it reads every tensor eagerly and cannot return
bfloat16. Here a tensor is only touched when the model reads it, float32 tensors stay
memory-mapped, and float16/bfloat16 are widened to float32 on access."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from ..core.errors import ModelError

_DTYPES = {
    "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
    "F64": np.dtype("<f8"), "I64": np.dtype("<i8"), "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"), "I8": np.dtype("i1"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
_FLOATS = {"F32", "F16", "BF16", "F64"}
_MAX_HEADER = 100 * 1024 * 1024


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    # bfloat16 is the top half of a float32: shift the bits into place
    return (raw.astype(np.uint32) << 16).view(np.float32)


class SafetensorsFile:
    """name -> float32 array on demand; `entries` holds (dtype, shape) without reading data."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as handle:
                prefix = handle.read(8)
                if len(prefix) < 8:
                    raise ModelError(f"{self.path}: not a safetensors file (only {size} bytes)")
                (header_len,) = struct.unpack("<Q", prefix)
                if header_len > min(_MAX_HEADER, size - 8):
                    raise ModelError(f"{self.path}: not a safetensors file (header length "
                                     f"{header_len} does not fit in {size} bytes)")
                header_bytes = handle.read(header_len)
        except OSError as exc:
            raise ModelError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        try:
            header = json.loads(header_bytes.decode("utf-8"))
            if not isinstance(header, dict):
                raise ValueError("header is not an object")
        except (UnicodeDecodeError, ValueError) as exc:
            raise ModelError(f"{self.path}: corrupt safetensors header ({exc})") from None
        self.metadata = header.pop("__metadata__", None) or {}
        self._data_start = 8 + header_len
        data_len = size - self._data_start
        self.entries: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
        for name, info in header.items():
            try:
                dtype, shape, (start, end) = info["dtype"], tuple(int(s) for s in info["shape"]), info["data_offsets"]
            except (KeyError, TypeError, ValueError):
                raise ModelError(f"{self.path}: tensor {name} has a malformed header entry") from None
            if dtype not in _DTYPES:
                raise ModelError(f"{self.path}: tensor {name} has unsupported dtype {dtype}")
            expected = int(np.prod(shape, dtype=np.int64)) * _DTYPES[dtype].itemsize
            if not (0 <= start <= end <= data_len) or end - start != expected:
                raise ModelError(f"{self.path}: tensor {name} lies outside the file or has the "
                                 f"wrong byte length (file truncated?)")
            self.entries[name] = (dtype, shape, start, end)
        self._map: np.memmap | None = None

    def keys(self):
        return self.entries.keys()

    def shape(self, name: str) -> tuple[int, ...]:
        return self.entries[name][1]

    def dtype(self, name: str) -> str:
        return self.entries[name][0]

    def get(self, name: str) -> np.ndarray:
        dtype, shape, start, end = self.entries[name]
        if dtype not in _FLOATS:
            raise ModelError(f"{self.path}: tensor {name} has dtype {dtype}, expected a float type")
        if self._map is None:
            if self.path.stat().st_size == self._data_start:
                self._map = np.zeros(0, dtype=np.uint8)
            else:
                self._map = np.memmap(self.path, dtype=np.uint8, mode="r", offset=self._data_start)
        raw = self._map[start:end].view(_DTYPES[dtype]).reshape(shape)
        if dtype == "F32":
            return raw
        if dtype == "BF16":
            return bf16_to_f32(raw)
        return raw.astype(np.float32)
