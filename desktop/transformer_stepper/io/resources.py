"""Where the project's resources live (the built-in model, explanation texts, icons).

A wheel carries the repository's top-level resources/ folder inside the package
(transformer_stepper/resources, see pyproject.toml); a source checkout or an editable install
reads it where it is. TRANSFORMER_STEPPER_RESOURCES overrides both."""
from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]          # .../transformer_stepper


def resources_dir() -> Path:
    override = os.environ.get("TRANSFORMER_STEPPER_RESOURCES")
    if override:
        return Path(override)
    installed = _PACKAGE / "resources"
    if (installed / "model").is_dir():
        return installed
    # a source checkout: desktop/transformer_stepper -> repository root / resources
    return _PACKAGE.parents[1] / "resources"


def builtin_model_dir() -> Path:
    return resources_dir() / "model"


def builtin_translator_dir() -> Path:
    """The built-in encoder–decoder (a Marian folder; `train --recipe translator` writes it)."""
    return resources_dir() / "translator"
