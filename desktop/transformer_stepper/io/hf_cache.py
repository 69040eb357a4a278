"""The models a user already downloaded with Hugging Face tools, found in the hub cache.

Layout: $HF_HOME/hub (default ~/.cache/huggingface/hub; HF_HUB_CACHE overrides the whole path)
holds models--<org>--<name>/snapshots/<revision>/ folders; a snapshot we can offer has a
config.json. Nothing is opened or parsed here beyond listing folders."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional


@dataclass(frozen=True)
class CachedModel:
    repo_id: str        # "org/name"
    revision: str       # the snapshot folder's name (a commit hash)
    path: Path          # the snapshot folder


def hub_cache_dir(environ: Optional[Mapping[str, str]] = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def list_cached_models(cache_dir: Optional[Path] = None) -> list[CachedModel]:
    """Every snapshot holding a config.json, newest snapshot first within a repository."""
    root = hub_cache_dir() if cache_dir is None else Path(cache_dir)
    found: list[CachedModel] = []
    try:
        repos = sorted(p for p in root.iterdir() if p.name.startswith("models--") and p.is_dir())
    except OSError:
        return []
    for repo in repos:
        repo_id = repo.name[len("models--"):].replace("--", "/")
        try:
            snapshots = [s for s in (repo / "snapshots").iterdir() if (s / "config.json").is_file()]
        except OSError:
            continue
        snapshots.sort(key=_mtime, reverse=True)
        found.extend(CachedModel(repo_id, s.name, s) for s in snapshots)
    return found


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
