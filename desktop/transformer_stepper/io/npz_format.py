"""The project's own .npz weight format, read and written without pickle.

Layout (every member a plain numeric or unicode array, so allow_pickle=False works):
  __config__      0-d unicode array: JSON of core.config.ModelConfig fields
  __tokenizer__   optional 0-d unicode array: the tokenizer.json text (else a tokenizer.json
                  must sit beside the .npz)
  <name>          one float array per parameter, named as in core/forward.py
                  (wte, wpe, h.0.attn.q.w stored [d_in, d_out], ...)
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from ..core.config import ModelConfig
from ..core.errors import ModelError


def read(path: Path) -> tuple[ModelConfig, dict[str, np.ndarray], Optional[str]]:
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ModelError(f"{path}: not a readable .npz ({exc})") from None
    if not hasattr(archive, "files"):
        raise ModelError(f"{path}: a single .npy array, not a model .npz")
    with archive:
        if "__config__" not in archive.files:
            raise ModelError(f"{path}: no __config__ entry (not a Transformer Stepper .npz)")
        try:
            config = ModelConfig.from_dict(json.loads(str(archive["__config__"])))
            tokenizer_json = str(archive["__tokenizer__"]) if "__tokenizer__" in archive.files else None
            params = {}
            for name in archive.files:
                if name.startswith("__"):
                    continue
                value = archive[name]
                if value.dtype.kind != "f":
                    raise ModelError(f"{path}: tensor {name} has dtype {value.dtype}, expected float")
                params[name] = value.astype(np.float32, copy=False)
        except ValueError as exc:  # object arrays ask for pickle: refused
            raise ModelError(f"{path}: {exc}") from None
        except zipfile.BadZipFile as exc:
            raise ModelError(f"{path}: corrupt archive ({exc})") from None
    return config, params, tokenizer_json


def write(path: Path, config: ModelConfig, params: Mapping[str, np.ndarray],
          tokenizer_json: Optional[str] = None) -> None:
    members = {"__config__": np.array(json.dumps(config.to_dict()))}
    if tokenizer_json is not None:
        members["__tokenizer__"] = np.array(tokenizer_json)
    members.update({name: np.ascontiguousarray(value, dtype=np.float32) for name, value in params.items()})
    np.savez(path, **members)
