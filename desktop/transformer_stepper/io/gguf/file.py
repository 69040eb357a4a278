"""Read one GGUF file (llama.cpp / Ollama / LM Studio): memory-mapped, header and tensor table at
open, a tensor dequantized to float32 only when asked (with the `gguf` package's numpy kernels).

Every problem is one ModelError naming the file: truncated, wrong magic or version, a tensor
whose data runs past the end, an unknown or unreadable quant type, a missing metadata key.
Nothing from the file is executed; strings are decoded as UTF-8 and nothing else."""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ...core.model.errors import ModelError
from .header import Tensor, read_header
from ..safetensors_file import check_unchanged, file_identity, open_regular

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_HEADER_BYTES = 24          # magic, version, tensor count, metadata count


def _gguf():
    try:
        import gguf  # noqa: F401  (numpy-only; llama.cpp's own reader and dequantizers)
        from gguf import quants
    except ImportError:  # pragma: no cover - a runtime dependency, but say so plainly
        raise ModelError("reading GGUF needs the 'gguf' package: pip install gguf") from None
    return gguf, quants


def _check_prefix(path: Path, size: int) -> None:
    if size < _HEADER_BYTES:
        raise ModelError(f"{path}: not a GGUF file (only {size} bytes; truncated?)")
    with open_regular(path) as handle:            # never a FIFO or a device
        head = handle.read(_HEADER_BYTES)
    if head[:4] != _MAGIC:
        raise ModelError(f"{path}: not a GGUF file (magic {head[:4]!r}, expected b'GGUF')")
    (version,) = struct.unpack("<I", head[4:8])
    if version not in _VERSIONS:
        raise ModelError(f"{path}: GGUF version {version} is not read (versions 2 and 3 are)")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # noqa: BLE001 - only used in a message
        return "?"


class GGUFFile:
    """One .gguf: `metadata` (key -> value, read at open), `tensors` (name -> its record, data
    memory-mapped; io/gguf/header.py), `get(name)` float32 on demand."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.identity = file_identity(self.path)      # a regular file, or one line saying what
        size = self.identity[2]
        _check_prefix(self.path, size)
        _gguf()                         # the package is there, or one line saying so
        try:
            self.metadata, tensors = read_header(self.path, size)
        except ModelError as exc:
            why = str(exc)
            if " has unknown quant type " in why:
                why += f" (a type newer than the installed gguf package {_version()}?)"
            raise ModelError(f"{self.path}: {why}") from None
        except OSError as exc:
            raise ModelError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        self.size = size
        self.tensors: dict[str, Tensor] = {t.name: t for t in tensors}

    # ------------------------------------------------------------------ metadata
    def value(self, key: str, default: Any = None, required: bool = False) -> Any:
        if key in self.metadata:
            return self.metadata[key]
        if required:
            raise ModelError(f"{self.path}: GGUF metadata has no {key!r}")
        return default

    def integer(self, key: str, default: Optional[int] = None) -> int:
        value = self.value(key, default, required=default is None)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise ModelError(f"{self.path}: GGUF metadata {key} must be a positive integer, got {value!r}")
        return int(value)

    def number(self, key: str, default: Optional[float] = None) -> float:
        value = self.value(key, default, required=default is None)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                or not np.isfinite(value) or value < 0:
            raise ModelError(f"{self.path}: GGUF metadata {key} must be a non-negative number, got {value!r}")
        return float(value)

    # ------------------------------------------------------------------ tensors
    def shape(self, name: str) -> tuple[int, ...]:
        """numpy order (rows first): GGUF lists dims fastest first, so reversed."""
        return tuple(int(d) for d in reversed(self.tensors[name].shape.tolist()))

    def quant_type(self, name: str) -> str:
        return self.tensors[name].tensor_type.name

    def is_float32(self, name: str) -> bool:
        return self.quant_type(name) == "F32"

    def check_readable(self, name: str) -> None:
        _, quants = _gguf()
        qtype = self.tensors[name].tensor_type
        kind = qtype.name
        if kind in ("F32", "F16", "BF16", "F64"):
            return
        cls = getattr(quants, "_type_traits", {}).get(qtype)
        if cls is None or not hasattr(cls, "dequantize_blocks"):
            raise ModelError(f"{self.path}: tensor {name} has quant type {kind}, which the installed "
                             f"gguf package ({_version()}) cannot dequantize")

    def check_unchanged(self) -> None:
        check_unchanged(self.path, self.identity)      # before every read of the mapping

    def stored(self, name: str) -> np.ndarray:
        """The tensor's stored data: float arrays as they are, block types as [rows, bytes]."""
        self.check_unchanged()
        return self.tensors[name].data

    def get(self, name: str) -> np.ndarray:
        """The whole tensor as float32 [rows, cols] (a memory-mapped view for F32)."""
        return self._dequantize(name, self.stored(name))

    def rows(self, name: str, index) -> np.ndarray:
        """Rows `index` of a 2-D tensor as float32, dequantizing only those rows (a block never
        spans two rows in GGUF)."""
        return self._dequantize(name, self.stored(name)[index])

    def expert(self, name: str, expert: int) -> np.ndarray:
        """Expert `expert`'s [out, in] slice of a 3-D experts tensor as float32, dequantizing
        only its blocks (a block never spans two rows, so never two experts)."""
        return self._dequantize(name, self.stored(name)[expert])

    def dequantize_codes(self, name: str, codes: np.ndarray) -> np.ndarray:
        """Rows of the tensor given as their stored bytes ([rows, bytes] uint8) as float32: the
        numpy reference the compiled kernels equal (core/model/quantized.py)."""
        if self.quant_type(name) in ("F16", "F32", "BF16", "F64"):
            codes = codes.view(self.tensors[name].data.dtype)
        return self._dequantize(name, codes)

    def _dequantize(self, name: str, data: np.ndarray) -> np.ndarray:
        self.check_readable(name)
        qtype = self.tensors[name].tensor_type
        if qtype.name == "F32":
            return data
        if qtype.name in ("F16", "F64"):
            value = data.astype(np.float32)
        else:
            _, quants = _gguf()
            try:
                value = quants.dequantize(data, qtype)
            except (ValueError, NotImplementedError) as exc:
                raise ModelError(f"{self.path}: tensor {name} ({qtype.name}) could not be "
                                 f"dequantized ({_reason(exc)})") from None
            value = np.ascontiguousarray(value, dtype=np.float32)
        value.flags.writeable = False
        return value
