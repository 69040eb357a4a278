"""The header of a GGUF file (metadata and tensor table), read in one pass over the memory-mapped
bytes. gguf-py's GGUFReader builds a numpy view per value (1.1 M of them for a Llama 3
vocabulary: 5.2 s to open a 1B file); this reads numbers with struct and number arrays with one
numpy view each, string arrays in a loop: 0.2 s for the same file. Tensor data stay
memory-mapped, shaped as GGUFReader shapes them (float types as their dtype, block types as
[rows..., bytes per row]), so gguf.quants dequantizes them.

Errors are ModelErrors without the file name (gguf_file.py adds it): truncated, an unknown
value or quant type, a tensor whose data runs past the end. Nothing in the file is executed;
strings are UTF-8 or refused."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.model.errors import ModelError

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}
_DTYPES = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
           10: "<u8", 11: "<i8", 12: "<f8"}
STRING, ARRAY = 8, 9
_FLOAT_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8,
                 "I16": np.int16, "I32": np.int32, "I64": np.int64}


@dataclass(frozen=True)
class Tensor:
    """What gguf_file reads of a tensor record (the fields GGUFReader's ReaderTensor has)."""
    name: str
    tensor_type: Any            # gguf.GGMLQuantizationType
    shape: np.ndarray           # GGUF order: fastest dimension first
    n_elements: int
    n_bytes: int
    data_offset: int
    data: np.ndarray


class _Cursor:
    def __init__(self, buffer) -> None:
        self.buffer, self.at = buffer, 0

    def unpack(self, fmt: str):
        value = struct.unpack_from(fmt, self.buffer, self.at)
        self.at += struct.calcsize(fmt)
        return value[0]

    def string(self) -> str:
        length = self.unpack("<Q")
        if self.at + length > len(self.buffer):
            raise struct.error("string past the end")
        raw = bytes(self.buffer[self.at:self.at + length])
        self.at += length
        return raw.decode("utf-8")

    def value(self, kind: int):
        if kind in _SCALARS:
            value = self.unpack(_SCALARS[kind])
            return bool(value) if kind == 7 else value
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            item, count = self.unpack("<I"), self.unpack("<Q")
            if item in _DTYPES:
                dtype = np.dtype(_DTYPES[item])
                end = self.at + count * dtype.itemsize
                if end > len(self.buffer):
                    raise struct.error("array past the end")
                values = np.frombuffer(self.buffer, dtype, count, self.at).tolist()
                self.at = end
                return [bool(v) for v in values] if item == 7 else values
            return [self.value(item) for _ in range(count)]
        raise ModelError(f"unknown metadata value type {kind}")


def read_header(path, size: int) -> tuple[dict[str, Any], list[Tensor]]:
    """(metadata, tensors) of the GGUF at `path` (magic and version already checked)."""
    import gguf

    data = np.memmap(path, dtype=np.uint8, mode="r")
    cursor = _Cursor(memoryview(data))
    metadata: dict[str, Any] = {}
    try:
        cursor.at = 8
        n_tensors, n_kv = cursor.unpack("<Q"), cursor.unpack("<Q")
        for _ in range(n_kv):
            key = cursor.string()
            try:
                metadata[key] = cursor.value(cursor.unpack("<I"))
            except UnicodeDecodeError:
                raise ModelError(f"metadata {key} is not valid UTF-8") from None
        table = []
        for _ in range(n_tensors):
            name = cursor.string()
            dims = [cursor.unpack("<Q") for _ in range(cursor.unpack("<I"))]
            table.append((name, dims, cursor.unpack("<I"), cursor.unpack("<Q")))
    except (struct.error, UnicodeDecodeError, OverflowError, MemoryError) as exc:
        raise ModelError(f"truncated or corrupt GGUF header ({exc})") from None
    alignment = metadata.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise ModelError(f"general.alignment {alignment!r} is not a power of two")
    start = -(-cursor.at // alignment) * alignment
    tensors, seen = [], set()
    for name, dims, code, offset in table:
        try:
            qtype = gguf.GGMLQuantizationType(code)
        except ValueError:
            raise ModelError(f"tensor {name} has unknown quant type {code}") from None
        if name in seen:
            raise ModelError(f"tensor {name} is listed twice")
        seen.add(name)
        n_elements = int(np.prod(dims, dtype=np.int64)) if dims else 1
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        n_bytes = n_elements * type_size // block_size
        begin = start + offset
        if begin + n_bytes > size:
            raise ModelError(f"tensor {name} has data past the end of the file (truncated?)")
        shape = tuple(reversed(dims))
        raw = data[begin:begin + n_bytes]
        if qtype.name in _FLOAT_DTYPES:
            array = raw.view(_FLOAT_DTYPES[qtype.name]).reshape(shape)
        else:
            array = raw.reshape(gguf.quant_shape_to_byte_shape(shape, qtype))
        tensors.append(Tensor(name, qtype, np.array(dims, dtype=np.uint64), n_elements, n_bytes,
                              begin, array))
    return metadata, tensors
