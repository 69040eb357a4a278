"""The project's own .npz weight format, read and written without pickle.

Layout (every member a plain numeric or unicode array, so allow_pickle=False works):
  __config__      0-d unicode array: JSON of core.model.config.ModelConfig fields
  __tokenizer__   optional 0-d unicode array: the tokenizer.json text (else a tokenizer.json
                  must sit beside the .npz)
  <name>          one float array per parameter, named as in core/model/params.py
                  (wte, wpe, h.0.attn.q.w stored [d_in, d_out], ...)
Only the members the forward pass reads are decompressed; others are ignored.
"""
from __future__ import annotations

import json
import math
import zipfile
import zlib
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from ..core.model.config import ModelConfig
from ..core.model.errors import ModelError
from ..core.model.params import expected_shapes
from .safetensors_file import open_regular

_CORRUPT = (OSError, EOFError, zipfile.BadZipFile, zlib.error)


def config_from_dict(data, source: str) -> ModelConfig:
    """ModelConfig from its to_dict() form, every problem reported against `source`."""
    if not isinstance(data, dict):
        raise ModelError(f"{source}: the model config must be a JSON object, got {type(data).__name__}")
    try:
        return ModelConfig.from_dict(data)
    except ModelError as exc:
        raise ModelError(f"{source}: {str(exc).removeprefix('config: ')}") from None
    except TypeError as exc:  # a missing field
        raise ModelError(f"{source}: bad model config ({exc})") from None


def _member(archive, name: str, path: Path) -> np.ndarray:
    try:
        return archive[name]
    except ValueError as exc:   # object arrays were refused by their header already
        raise ModelError(f"{path}: member {name} is corrupt ({exc})") from None
    except _CORRUPT as exc:
        raise ModelError(f"{path}: member {name} is corrupt ({exc})") from None


def _text(archive, name: str, path: Path) -> str:
    shape, dtype, _ = _declared(archive, name, path)
    if dtype.kind != "U" or shape != ():
        raise ModelError(f"{path}: member {name} must be a 0-d unicode array, got {dtype} {shape}")
    value = _member(archive, name, path)
    if value.dtype.kind != "U" or value.ndim != 0:
        raise ModelError(f"{path}: member {name} must be a 0-d unicode array, got {value.dtype} {value.shape}")
    return str(value)


# a model's parameters inflate from a zip by less than this (float weights barely compress); a
# member that claims more is a zip bomb unless it is small anyway
_MAX_RATIO, _SMALL = 64, 64 << 20


def _declared(archive, name: str, path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """A member's shape, dtype and stored sizes, from its .npy header alone: nothing is
    decompressed beyond the header. -> (shape, dtype, compressed bytes)."""
    zf = archive.zip
    try:
        info = zf.getinfo(name + ".npy")
        with zf.open(info) as member:
            version = np.lib.format.read_magic(member)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read(member)
            header_bytes = member.tell() if hasattr(member, "tell") else 0
    except KeyError:
        raise ModelError(f"{path}: member {name} is not a .npy array") from None
    except (ValueError, OverflowError, *_CORRUPT) as exc:
        raise ModelError(f"{path}: member {name} has a corrupt .npy header ({exc})") from None
    if dtype.hasobject:
        raise ModelError(f"{path}: member {name} is an object array, which would need pickle (refused)")
    if any(d >= 1 << 62 for d in shape):
        raise ModelError(f"{path}: member {name} declares shape {shape}, too big for any array")
    nbytes = math.prod(shape) * dtype.itemsize
    if info.file_size < header_bytes + nbytes:
        raise ModelError(f"{path}: member {name} is truncated ({info.file_size} bytes stored, "
                         f"its {dtype} {shape} needs {header_bytes + nbytes})")
    if nbytes > _SMALL and nbytes > _MAX_RATIO * max(info.compress_size, 1):
        raise ModelError(f"{path}: member {name} would inflate {info.compress_size} stored bytes "
                         f"to {nbytes} (refused: weights do not compress that much)")
    return tuple(shape), dtype, info.compress_size


def _tensor(archive, name: str, path: Path, shape: tuple[int, ...]) -> np.ndarray:
    declared, dtype, _ = _declared(archive, name, path)
    if dtype.kind != "f":
        raise ModelError(f"{path}: tensor {name} has dtype {dtype}, expected float")
    if declared != shape:      # checked before decompressing it
        raise ModelError(f"{path}: tensor {name} has shape {declared}, expected {shape}")
    value = _member(archive, name, path)
    if value.dtype.kind != "f":
        raise ModelError(f"{path}: tensor {name} has dtype {value.dtype}, expected float")
    value = value.astype(np.float32, copy=False)
    value.flags.writeable = False
    return value


def _check_magic(path: Path) -> None:
    # say what the file is before numpy does (its wording changes between versions)
    try:
        with open_regular(path) as handle:
            magic = handle.read(6)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if magic.startswith(b"\x93NUMPY"):
        raise ModelError(f"{path}: a single .npy array, not a model .npz")
    if magic[:1] == b"\x80":  # every pickle protocol >= 2 starts with PROTO
        raise ModelError(f"{path}: a pickle, not an .npz; pickles are never opened (they can run code)")
    if not magic.startswith(b"PK"):
        raise ModelError(f"{path}: not an .npz (it is not a zip archive)")


def read(path: Path) -> tuple[ModelConfig, dict[str, np.ndarray], Optional[str]]:
    _check_magic(path)
    # our own handle: np.load leaks the file it opened when the archive turns out corrupt
    with open_regular(path) as handle:
        try:
            archive = np.load(handle, allow_pickle=False)
        except (ValueError, *_CORRUPT) as exc:
            raise ModelError(f"{path}: not a readable .npz ({exc})") from None
        if not hasattr(archive, "files"):
            raise ModelError(f"{path}: not a model .npz")
        with archive:
            return _read_members(archive, path)


def _read_members(archive, path: Path) -> tuple[ModelConfig, dict[str, np.ndarray], Optional[str]]:
    if "__config__" not in archive.files:
        raise ModelError(f"{path}: no __config__ entry (not a Transformer Stepper .npz)")
    config_text = _text(archive, "__config__", path)
    try:
        config_data = json.loads(config_text)
    except (ValueError, RecursionError) as exc:
        raise ModelError(f"{path}: __config__ is not valid JSON ({exc})") from None
    config = config_from_dict(config_data, f"{path}: __config__")
    tokenizer_json = _text(archive, "__tokenizer__", path) if "__tokenizer__" in archive.files else None
    params = {name: _tensor(archive, name, path, shape)
              for name, shape in expected_shapes(config).items() if name in archive.files}
    return config, params, tokenizer_json


def write(path: Path, config: ModelConfig, params: Mapping[str, np.ndarray],
          tokenizer_json: Optional[str] = None) -> None:
    members = {"__config__": np.array(json.dumps(config.to_dict()))}
    if tokenizer_json is not None:
        members["__tokenizer__"] = np.array(tokenizer_json)
    members.update({name: np.ascontiguousarray(value, dtype=np.float32) for name, value in params.items()})
    np.savez(path, **members)
