"""Where the project's resources live (the built-in model, explanation texts)."""
from __future__ import annotations

import os
from pathlib import Path


def resources_dir() -> Path:
    override = os.environ.get("TRANSFORMER_STEPPER_RESOURCES")
    if override:
        return Path(override)
    # desktop/transformer_stepper/io/resources.py -> repository root / resources
    return Path(__file__).resolve().parents[3] / "resources"


def builtin_model_dir() -> Path:
    return resources_dir() / "model"
