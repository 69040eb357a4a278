"""Model families as plug-ins. Each module describes one checkpoint layout:

    MODEL_TYPES      config.json model_type values it opens (config.family is one of them)
    config_from_hf(cfg, source, names, warnings) -> ModelConfig
    keymap(config, names) -> KeyMap: (core name, checkpoint name, transform) for every tensor
    detect(names) -> bool          a lone .safetensors without config.json is of this family
    infer_hf_config(shape, names) -> dict   config.json fields from tensor shapes (or raises)
    LAYER_MARKER     the block prefix in checkpoint names (to count layers)

The loader loops over FAMILIES; adding a family is one module here plus its fixtures."""
from __future__ import annotations

from types import ModuleType
from typing import Optional

from ...core.errors import ModelError
from . import (bart, bert, distilbert, gemma, gemma2, gemma3, gpt2, gpt_neox, llama, marian, olmo2, phi3,
               roberta, smollm3, stepper, t5)

# gemma3, gemma2 and olmo2 before llama: their lone files have Llama's names plus their own norms
FAMILIES: tuple[ModuleType, ...] = (stepper, bert, roberta, distilbert, gpt2, gemma3, gemma2, olmo2, llama,
                                    gemma, smollm3, phi3, gpt_neox, t5, bart, marian)
REFUSED: dict[str, str] = {}  # model types people have that this version does not compute, and why


def supported_model_types() -> list[str]:
    return [t for family in FAMILIES for t in family.MODEL_TYPES]


def by_model_type(model_type, source: str) -> ModuleType:
    if isinstance(model_type, (list, dict)):     # not a name (nor hashable: a TypeError)
        shown = repr(model_type) if len(repr(model_type)) <= 60 else repr(model_type)[:57] + "..."
        raise ModelError(f"{source}: model_type must be text, got {shown}")
    for family in FAMILIES:
        if model_type in family.MODEL_TYPES:
            return family
    if model_type in REFUSED:
        raise ModelError(f"{source}: model_type={model_type!r}: {REFUSED[model_type]}")
    raise ModelError(f"{source}: unsupported architecture model_type={model_type!r} "
                     f"(supported: {', '.join(supported_model_types())})")


def of_config(config) -> ModuleType:
    """The family module that made this config (config.family names it)."""
    for family in FAMILIES:
        if config.family in getattr(family, "CONFIG_FAMILIES", family.MODEL_TYPES):
            return family
    return by_model_type(config.family, config.name or "model")


def detect(names: set[str]) -> Optional[ModuleType]:
    """The family whose tensor names these are (a lone .safetensors without config.json)."""
    for family in FAMILIES:
        if family.detect(names):
            return family
    return None
