"""Model families as plug-ins: one module per checkpoint layout, each declaring

    MODEL_TYPES      config.json model_type values it opens (config.family is one of them)
    config_from_hf(cfg, source, names, warnings) -> ModelConfig
    keymap(config, names) -> KeyMap: (core name, checkpoint name, transform) for every tensor
    detect(names) -> bool          a lone .safetensors without config.json is of this family
    infer_hf_config(shape, names) -> dict   config.json fields from tensor shapes (or raises)
    LAYER_MARKER     the block prefix in checkpoint names (to count layers)
    CONFIG_FAMILIES  (optional) the config.family values it makes, when not its MODEL_TYPES
    SEQ2SEQ          (optional) True for an encoder–decoder (io/seq2seq_loader.py loads it)
    computed_params(config) -> dict   (optional) tables made at open, not stored (Marian's)

`Family.of(module)` checks that contract when the package is imported (a module missing a
piece is named at once, not when a user's file first needs it) and is what the loader sees;
the loader loops over FAMILIES; adding a family is one module here plus its fixtures."""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Optional

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from . import (bart, bert, distilbert, gemma, gemma2, gemma3, gpt2, gpt_neox, llama, marian, mixtral, olmo2,
               olmoe, phi3, qwen2_moe, qwen3_moe, roberta, smollm3, stepper, t5)


@dataclass(frozen=True)
class Family:
    name: str                                   # the module's name ("llama")
    model_types: tuple[str, ...]
    config_families: tuple[str, ...]            # config.family values its configs carry
    config_from_hf: Callable[[dict, str, set, list], ModelConfig]
    keymap: Callable                            # (config, names) -> KeyMap
    detect: Callable[[set], bool]
    infer_hf_config: Callable                   # (shape reader, names) -> config.json fields
    layer_marker: str
    seq2seq: bool = False
    computed_params: Optional[Callable] = None  # (config) -> tables made at open (Marian's sinusoids)

    @classmethod
    def of(cls, module: ModuleType) -> "Family":
        name = module.__name__.rpartition(".")[2]
        missing = [a for a in ("MODEL_TYPES", "config_from_hf", "keymap", "detect", "infer_hf_config",
                               "LAYER_MARKER") if not hasattr(module, a)]
        if missing:
            raise TypeError(f"io/families/{name}.py does not declare {', '.join(missing)}")
        types = tuple(module.MODEL_TYPES)
        return cls(name, types, tuple(getattr(module, "CONFIG_FAMILIES", types)), module.config_from_hf,
                   module.keymap, module.detect, module.infer_hf_config, module.LAYER_MARKER,
                   bool(getattr(module, "SEQ2SEQ", False)), getattr(module, "computed_params", None))


# gemma3, gemma2 and olmo2 before llama: their lone files have Llama's names plus their own norms;
# the mixture-of-experts families too (a Qwen3-MoE with dense layers has mlp.gate_proj)
FAMILIES: tuple[Family, ...] = tuple(Family.of(m) for m in (
    stepper, bert, roberta, distilbert, gpt2, gemma3, gemma2, olmo2, mixtral, qwen2_moe, qwen3_moe, olmoe,
    llama, gemma, smollm3, phi3, gpt_neox, t5, bart, marian))
# model types people have that this version does not compute, and why
REFUSED: dict[str, str] = {
    "gpt_oss": ("a mixture of experts with attention sinks and a clamped SwiGLU, not computed yet "
                "(Mixtral, Qwen3-MoE, Qwen2-MoE and OLMoE are)"),
    "deepseek_v2": ("multi-head latent attention (keys and values from a compressed latent) is not "
                    "computed yet"),
    "deepseek_v3": ("multi-head latent attention (keys and values from a compressed latent) is not "
                    "computed yet"),
}


def supported_model_types() -> list[str]:
    return [t for family in FAMILIES for t in family.model_types]


def by_model_type(model_type, source: str) -> Family:
    if isinstance(model_type, (list, dict)):     # not a name (nor hashable: a TypeError)
        shown = repr(model_type) if len(repr(model_type)) <= 60 else repr(model_type)[:57] + "..."
        raise ModelError(f"{source}: model_type must be text, got {shown}")
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    if model_type in REFUSED:
        raise ModelError(f"{source}: model_type={model_type!r}: {REFUSED[model_type]}")
    raise ModelError(f"{source}: unsupported architecture model_type={model_type!r} "
                     f"(supported: {', '.join(supported_model_types())})")


def of_config(config) -> Family:
    """The family that made this config (config.family names it)."""
    for family in FAMILIES:
        if config.family in family.config_families:
            return family
    return by_model_type(config.family, config.name or "model")


def detect(names: set[str]) -> Optional[Family]:
    """The family whose tensor names these are (a lone .safetensors without config.json)."""
    for family in FAMILIES:
        if family.detect(names):
            return family
    return None
