"""Gemma 3 (`gemma3_text`, and the text part of `gemma3`): Gemma 2's layout (sandwich norms,
(1 + weight) RMSNorm, √d_model scale, GeGLU, query_pre_attn_scalar) plus per-head q_norm /
k_norm ((1 + weight) too) before the rotation, and two kinds of layers: local ones with the
sliding window and their own rope base (rope_local_base_freq, never scaled) and global ones
with rope_theta and rope_scaling; one global layer every sliding_window_pattern (layer_types).
No soft-capping unless the config sets it. A `gemma3` (image-text) checkpoint opens as its
language model: text_config, tensors under model.language_model. / language_model.model.

Keys read and transformers' Gemma3TextConfig defaults used when absent: vocab_size 262208,
hidden_size 2304, intermediate_size 9216, num_hidden_layers 26, num_attention_heads 8,
num_key_value_heads 4, head_dim 256, hidden_activation gelu_pytorch_tanh,
max_position_embeddings 131072, rms_norm_eps 1e-6, tie_word_embeddings true, attention_bias
false, query_pre_attn_scalar 256, sliding_window 4096, sliding_window_pattern 6 (layer_types:
layer i is local unless (i + 1) % 6 == 0), rope_theta 1e6 with rope_scaling (or
rope_parameters.full_attention), rope_local_base_freq 1e4 (rope_parameters.sliding_attention,
which must be unscaled), final_logit_softcapping and attn_logit_softcapping null,
use_bidirectional_attention false (true is refused)."""
from __future__ import annotations

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import ADD_ONE, KeyMap, integer, number, strip_prefix
from .gemma2 import gemma_decoder, softcap
from .layer_kinds import branch_norm_keymap, sliding_layers, window_fields, with_defaults
from .llama import decoder_keymap
from .rope import rope_fields

MODEL_TYPES = ("gemma3_text", "gemma3")
CONFIG_FAMILIES = MODEL_TYPES
LAYER_MARKER = "layers."
PREFIXES = ("model.language_model.", "language_model.model.", "model.")
DEFAULTS = dict(vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                hidden_activation="gelu_pytorch_tanh", max_position_embeddings=131072,
                rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
                query_pre_attn_scalar=256, sliding_window_pattern=6)
DEFAULT_WINDOW = 4096
GLOBAL_THETA, LOCAL_THETA = 1_000_000.0, 10_000.0


def detect(names: set[str]) -> bool:
    return any(n.endswith("pre_feedforward_layernorm.weight") for n in names) and \
        any(n.endswith("self_attn.q_norm.weight") for n in names)


def text_config(cfg: dict, source: str) -> dict:
    """The language model's config: cfg itself (gemma3_text) or its text_config (gemma3)."""
    if cfg.get("model_type") != "gemma3":
        return cfg
    text = cfg.get("text_config") or {}
    if not isinstance(text, dict):
        raise ModelError(f"{source}: text_config must be an object, got {text!r}")
    if "tie_word_embeddings" not in text and cfg.get("tie_word_embeddings") is not None:
        text = {**text, "tie_word_embeddings": cfg["tie_word_embeddings"]}
    return {**text, "_name_or_path": cfg.get("_name_or_path")}


def rope_settings(cfg: dict, source: str, d_head: int, n_ctx: int) -> dict:
    """Global layers: rope_theta + rope_scaling; local layers: rope_local_base_freq, unscaled
    (transformers 4 keys, or transformers 5's rope_parameters per layer type)."""
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and ({"full_attention", "sliding_attention"} & set(params)):
        full = dict(params.get("full_attention") or {})
        local = dict(params.get("sliding_attention") or {})
    else:
        full = dict(cfg.get("rope_scaling") or {})
        full["rope_theta"] = cfg.get("rope_theta")
        local = {"rope_theta": cfg.get("rope_local_base_freq")}
    if local.get("rope_type", local.get("type", "default")) != "default":
        raise ModelError(f"{source}: scaled rope on the local layers is not supported "
                         f"(rope_parameters.sliding_attention={local!r})")
    theta = full.pop("rope_theta", None)
    fields = rope_fields({"rope_theta": GLOBAL_THETA if theta is None else theta,
                          "rope_scaling": full or None}, source, d_head, n_ctx)
    fields["rope_local_theta"] = number({"rope_local_base_freq": local.get("rope_theta")},
                                        "rope_local_base_freq", source, LOCAL_THETA, positive=True)
    return fields


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    cfg = text_config(cfg, source)
    window = cfg.get("sliding_window", DEFAULT_WINDOW)
    cfg = with_defaults(cfg, DEFAULTS)
    n_layer = integer(cfg, "num_hidden_layers", source)
    pattern = integer(cfg, "sliding_window_pattern", source)
    local = sliding_layers(cfg, source, n_layer,
                           ("sliding_attention" if (i + 1) % pattern else "full_attention"
                            for i in range(n_layer)))
    rope = rope_settings(cfg, source, integer(cfg, "head_dim", source),
                         integer(cfg, "max_position_embeddings", source))
    windows = window_fields({"sliding_window": window}, source, local)
    if not windows["local_layers"] and local:      # no window, but the local rope base still applies
        windows["local_layers"] = local
    return gemma_decoder({k: v for k, v in cfg.items() if k not in ("rope_scaling", "rope_parameters")},
                         source, names, "gemma3_text" if cfg.get("model_type") != "gemma3" else "gemma3",
                         qk_norm=True, attn_softcap=softcap(cfg, "attn_logit_softcapping", source),
                         final_softcap=softcap(cfg, "final_logit_softcapping", source),
                         **windows, **rope)


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    keys = branch_norm_keymap(decoder_keymap(config, norm_transform=ADD_ONE), config,
                              "post_attention_layernorm", "pre_feedforward_layernorm",
                              "post_feedforward_layernorm", ADD_ONE)
    prefix = strip_prefix(names, PREFIXES)
    outside = ("lm_head.", "language_model.lm_head.")
    return [(core, ckpt if ckpt.startswith(outside) else prefix + ckpt, t) for core, ckpt, t in keys]


def infer_hf_config(shape, names: set[str]) -> dict:
    raise ModelError("a Gemma 3 checkpoint (sandwich norms and q/k norms) without its config.json: "
                     "the window, the local/global layers and their rope bases are not in the "
                     "tensors; put the model's config.json beside the file")
