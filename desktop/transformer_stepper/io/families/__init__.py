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
    GGUF_LAYOUTS     (optional) how llama.cpp stores its models: GGUFLayout per GGUF architecture
                     (architecture name, metadata -> config, tensor names, per-tensor fix-ups;
                     gguf_layout.py); io/gguf finds them through gguf_layout_of

`Family.of(module)` checks that contract when the package is imported (a module missing a
piece is named at once, not when a user's file first needs it) and is what the loader sees;
the loaders loop over FAMILIES; adding a family is one module here (its HF key map and, if
llama.cpp stores it, its GGUF layout) plus its fixtures."""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Optional

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .gguf_layout import GGUFLayout
from . import (bart, bert, deepseek_v2, distilbert, gemma, gemma2, gemma3, gpt2, gpt_neox, llama, marian, mixtral, olmo2,
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
    gguf_layouts: tuple[GGUFLayout, ...] = ()   # how llama.cpp stores its models (GGUF)

    @classmethod
    def of(cls, module: ModuleType) -> "Family":
        name = module.__name__.rpartition(".")[2]
        missing = [a for a in ("MODEL_TYPES", "config_from_hf", "keymap", "detect", "infer_hf_config",
                               "LAYER_MARKER") if not hasattr(module, a)]
        if missing:
            raise TypeError(f"io/families/{name}.py does not declare {', '.join(missing)}")
        layouts = tuple(getattr(module, "GGUF_LAYOUTS", ()))
        if not all(isinstance(layout, GGUFLayout) for layout in layouts):
            raise TypeError(f"io/families/{name}.py: GGUF_LAYOUTS must be a tuple of GGUFLayout")
        types = tuple(module.MODEL_TYPES)
        return cls(name, types, tuple(getattr(module, "CONFIG_FAMILIES", types)), module.config_from_hf,
                   module.keymap, module.detect, module.infer_hf_config, module.LAYER_MARKER,
                   bool(getattr(module, "SEQ2SEQ", False)), getattr(module, "computed_params", None),
                   layouts)


# gemma3, gemma2 and olmo2 before llama: their lone files have Llama's names plus their own norms;
# the mixture-of-experts families too (a Qwen3-MoE with dense layers has mlp.gate_proj; DeepSeek-V2
# has q_proj and a dense first layer's mlp.gate_proj)
FAMILIES: tuple[Family, ...] = tuple(Family.of(m) for m in (
    stepper, bert, roberta, distilbert, gpt2, gemma3, gemma2, olmo2, deepseek_v2, mixtral, qwen2_moe, qwen3_moe, olmoe,
    llama, gemma, smollm3, phi3, gpt_neox, t5, bart, marian))


def _gguf_registry(families: tuple[Family, ...]) -> dict[tuple[str, bool], tuple[Family, GGUFLayout]]:
    """(GGUF architecture, with experts) -> the family and its layout; one family per key."""
    registry: dict[tuple[str, bool], tuple[Family, GGUFLayout]] = {}
    for family in families:
        for layout in family.gguf_layouts:
            key = (layout.architecture, layout.experts)
            if key in registry:
                raise TypeError(f"io/families/{family.name}.py: GGUF architecture {key[0]!r} "
                                f"{'with' if key[1] else 'without'} experts is already "
                                f"io/families/{registry[key][0].name}.py's")
            registry[key] = (family, layout)
    return registry


GGUF_LAYOUTS = _gguf_registry(FAMILIES)
# model types people have that this version does not compute, and why
REFUSED: dict[str, str] = {
    "gpt_oss": ("a mixture of experts with attention sinks and a clamped SwiGLU, not computed yet "
                "(Mixtral, Qwen3-MoE, Qwen2-MoE and OLMoE are)"),
    "deepseek_v3": ("DeepSeek-V3's router (sigmoid scores with a correction bias, noaux_tc) and its "
                    "multi-token prediction layers are not computed yet (DeepSeek-V2's latent attention "
                    "is: model_type deepseek_v2)"),
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


def supported_gguf_architectures() -> str:
    """The GGUF architectures opened, as an error message lists them."""
    dense = [arch for arch, experts in GGUF_LAYOUTS if not experts]
    moe = [arch if arch not in dense else f"{arch} ({family.name})"
           for (arch, experts), (family, _) in GGUF_LAYOUTS.items() if experts]
    return f"{', '.join(dense)}; with experts: {', '.join(moe)}"


def gguf_layout_of(arch, n_experts, source: str) -> tuple[Family, GGUFLayout]:
    """The family and layout of a GGUF file of general.architecture `arch` declaring `n_experts`
    experts (0: none), or a one-line refusal naming the file and the architecture. A file of a
    mixture-of-experts architecture that declares no experts gets that layout (its missing
    {arch}.expert_count is then named)."""
    found = GGUF_LAYOUTS.get((arch, bool(n_experts))) if isinstance(arch, str) else None
    if found is None and not n_experts and isinstance(arch, str):
        found = GGUF_LAYOUTS.get((arch, True))
    if found is None:
        declared = f" with {n_experts} experts (a mixture of experts)" if n_experts else ""
        raise ModelError(f"{source}: GGUF architecture {arch!r}{declared} is not supported "
                         f"(supported: {supported_gguf_architectures()})")
    return found
