"""GGUF models other local tools downloaded: Ollama (manifests name:tag -> a blob) and LM Studio
(publisher/repo folders of .gguf files). Only folders and small JSON manifests are read here."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
_LATER_SHARD = re.compile(r"-(\d{5})-of-\d{5}\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class LocalModel:
    source: str   # "Ollama" or "LM Studio"
    name: str     # "llama3.2:1b", "lmstudio-community/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q4_K_M.gguf"
    path: Path    # the GGUF file (an Ollama blob has no suffix; the loader reads its magic)


def ollama_models_dir(environ: Optional[Mapping[str, str]] = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env["OLLAMA_MODELS"]).expanduser() if env.get("OLLAMA_MODELS") else Path.home() / ".ollama" / "models"


def lmstudio_dirs(home: Optional[Path] = None) -> list[Path]:
    home = Path.home() if home is None else home
    return [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]


def _ollama_name(relative: Path) -> str:
    parts = list(relative.parts)
    if len(parts) < 2:
        return ":".join(parts)
    *where, model, tag = parts
    if where[:2] == ["registry.ollama.ai", "library"]:
        where = []
    elif where[:1] == ["registry.ollama.ai"]:
        where = where[1:]
    return "/".join([*where, model]) + f":{tag}"


def list_ollama(models_dir: Optional[Path] = None) -> list[LocalModel]:
    root = ollama_models_dir() if models_dir is None else Path(models_dir)
    manifests = root / "manifests"
    found = []
    try:
        files = sorted(p for p in manifests.rglob("*") if p.is_file())
    except OSError:
        return []
    for manifest in files:
        try:
            layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers", [])
        except (OSError, ValueError, AttributeError):
            continue   # not a manifest we understand: not listed
        for layer in layers if isinstance(layers, list) else []:
            digest = layer.get("digest") if isinstance(layer, dict) else None
            if layer.get("mediaType") == OLLAMA_MODEL_LAYER and isinstance(digest, str):
                blob = root / "blobs" / digest.replace(":", "-")
                if blob.is_file():
                    found.append(LocalModel("Ollama", _ollama_name(manifest.relative_to(manifests)), blob))
    return found


def list_lmstudio(roots: Optional[list[Path]] = None) -> list[LocalModel]:
    found = []
    for root in lmstudio_dirs() if roots is None else roots:
        try:
            files = sorted(p for p in root.rglob("*.gguf") if p.is_file())
        except OSError:
            continue
        for path in files:
            shard = _LATER_SHARD.search(path.name)
            if path.name.lower().startswith("mmproj") or (shard and shard.group(1) != "00001"):
                continue   # vision towers, and the later shards of a split model
            found.append(LocalModel("LM Studio", str(path.relative_to(root)), path))
    return found


def list_local_models() -> list[LocalModel]:
    return list_ollama() + list_lmstudio()
