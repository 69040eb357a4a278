"""A lone .safetensors without config.json: the family from its distinguishing tensors, the
sizes from their shapes, and every other setting either refused or named as a guess.

Refused (the numbers would depend on settings only config.json holds):
  sandwich norms (pre_/post_feedforward_layernorm: Gemma 2/3), post-norms without input norms
  or q/k norms over the whole projection (OLMo 2), fused qkv_proj (Phi-3), query_key_value
  (GPT-NeoX), and a Llama-layout file that looks like Gemma (a 256k vocabulary, or norm gains
  centred on 0: Gemma stores w for (1 + w)).
Guessed (named in Model.warnings and Model.settings_guessed; the window says "settings guessed"):
  the head count (heads of 64 unless q/k norms give the width), and per family the settings
  in GUESSED below, at the values transformers' config classes default them to."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..core.model.config import ModelConfig

GUESSED = {   # ModelConfig fields a lone file cannot tell, per family
    "llama": ("rope_theta", "rope_scaling", "ln_eps", "activation", "sliding_window", "n_ctx"),
    "qwen2": ("rope_theta", "rope_scaling", "ln_eps", "activation", "sliding_window", "n_ctx"),
    "qwen3": ("rope_theta", "rope_scaling", "ln_eps", "activation", "sliding_window", "n_ctx"),
    "gpt2": ("ln_eps", "activation"),
    "bert": ("ln_eps", "activation"),
    "roberta": ("ln_eps", "activation", "position_offset"),
    "distilbert": ("activation",),
}
_GEMMA_VOCABS = (256000, 256128, 262144, 262208)


def _ends(names: set[str], suffix: str) -> Optional[str]:
    return next((n for n in sorted(names) if n.endswith(suffix)), None)


def refusal(ckpt, names: set[str]) -> Optional[str]:
    """Why this file cannot run without its config.json (None: it can, with named guesses)."""
    put = "put the model's config.json beside it"
    sandwich = _ends(names, "pre_feedforward_layernorm.weight")
    if sandwich:
        which = "Gemma 3" if _ends(names, "self_attn.q_norm.weight") else "Gemma 2"   # q/k norms: 3
        return (f"no config.json, and {sandwich} (sandwich norms) marks {which}, whose "
                f"soft-capping, local/global layers and rope bases only config.json says; {put}")
    post = _ends(names, "post_feedforward_layernorm.weight")
    if post and not _ends(names, "input_layernorm.weight"):
        return f"no config.json, and {post} without input norms marks OLMo 2; {put}"
    q_norm, q_proj = _ends(names, "self_attn.q_norm.weight"), _ends(names, "self_attn.q_proj.weight")
    if q_norm and q_proj and ckpt.shape(q_norm)[0] == ckpt.shape(q_proj)[0]:
        return f"no config.json, and {q_norm} spans the whole projection (OLMo 2's q/k norms); {put}"
    embed = _ends(names, "embed_tokens.weight")
    if q_proj and embed and not q_norm and not _ends(names, "q_proj.bias"):
        if ckpt.shape(embed)[0] in _GEMMA_VOCABS:
            return (f"no config.json, and a vocabulary of {ckpt.shape(embed)[0]} is Gemma's; Gemma's "
                    f"(1 + w) norms, √d embedding scale and GeGLU would be lost as Llama; {put}")
        norm = _ends(names, "norm.weight")
        final = next((n for n in sorted(names) if n.endswith("model.norm.weight") or n == "norm.weight"), norm)
        if final is not None and float(np.mean(ckpt.get(final))) < 0.5:
            return (f"no config.json, and the norm gains in {final} are centred on 0 (mean "
                    f"{float(np.mean(ckpt.get(final))):.3g}), as Gemma stores them for (1 + w); "
                    f"running it as Llama would be wrong; {put}")
    return None


def head_width(ckpt, names: set[str]) -> Optional[int]:
    """The head width when q/k norms give it (Qwen3: q_norm is [d_head])."""
    q_norm = _ends(names, "self_attn.q_norm.weight")
    return ckpt.shape(q_norm)[0] if q_norm else None


def describe(config: ModelConfig, heads_known: bool) -> tuple[str, ...]:
    """'field=value' for every setting of `config` that was guessed, not read."""
    guessed = [] if heads_known else [f"n_head={config.n_head} (heads of {config.d_head} assumed)"]
    for field in GUESSED.get(config.family, ()):
        value = getattr(config, field)
        shown = {"rope_scaling": value or "none", "sliding_window": value or "none"}.get(field, value)
        guessed.append(f"{field}={shown}")
    return tuple(guessed)
