"""The project's own models (the built-in one and what `train` writes): the core's names as
they are, the ModelConfig in config.json's stepper_config (or the file's metadata)."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from ...core.model.params import expected_shapes
from .common import IDENTITY, KeyMap

MODEL_TYPES = ("transformer-stepper",)
LAYER_MARKER = "h."


def detect(names: set[str]) -> bool:
    return "wte" in names and any(n.endswith(".attn.q.w") for n in names)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    from ..npz_format import config_from_dict

    stepper = cfg.get("stepper_config")
    if not isinstance(stepper, dict):
        raise ModelError(f"{source}: stepper_config must be an object, got {stepper!r}")
    return config_from_dict(stepper, source)


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    return [(name, name, IDENTITY) for name in expected_shapes(config)]


def infer_hf_config(shape, names: set[str]) -> dict:
    raise ModelError("the project's own safetensors carry their config in the file's metadata")
CONFIG_FAMILIES = ("stepper",)  # config.family of the project's models
