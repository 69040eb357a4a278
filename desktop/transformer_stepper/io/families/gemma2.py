"""Gemma 2 (`gemma2`): Gemma's (1 + weight) RMSNorm, √d_model embedding scale, GeGLU and tied
head, plus: sandwich norms (input_layernorm -> ln_1, post_attention_layernorm -> post_attn_ln,
pre_feedforward_layernorm -> ln_2, post_feedforward_layernorm -> post_mlp_ln), attention
scores scaled by query_pre_attn_scalar^-1/2 and soft-capped (attn_logit_softcapping), logits
soft-capped (final_logit_softcapping), sliding-window layers alternating with global ones
(layer_types; by default the even layers 0, 2, ... are local).

Keys read and transformers' Gemma2Config defaults used when absent (written down here, as
the loader must not guess otherwise): vocab_size 256000, hidden_size 2304, intermediate_size
9216, num_hidden_layers 26, num_attention_heads 8, num_key_value_heads 4, head_dim 256,
hidden_activation gelu_pytorch_tanh, max_position_embeddings 8192, rms_norm_eps 1e-6,
tie_word_embeddings true, rope_theta 10000 (rope_parameters), attention_bias false,
query_pre_attn_scalar 256, sliding_window 4096, layer_types sliding/full alternating,
final_logit_softcapping 30.0, attn_logit_softcapping 50.0, use_bidirectional_attention
false (true is refused)."""
from __future__ import annotations

import numpy as np

from ...core.model.config import ModelConfig
from ...core.model.errors import ModelError
from .common import ADD_ONE, KeyMap, activation, flag, integer, number, prefixed, strip_prefix
from .layer_kinds import branch_norm_keymap, sliding_layers, window_fields, with_defaults
from .llama import ACTIVATIONS, decoder_config, decoder_keymap

MODEL_TYPES = ("gemma2",)
LAYER_MARKER = "layers."
PREFIXES = ("model.",)
DEFAULTS = dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                hidden_activation="gelu_pytorch_tanh", max_position_embeddings=8192, rms_norm_eps=1e-6,
                tie_word_embeddings=True, attention_bias=False, query_pre_attn_scalar=256,
                final_logit_softcapping=30.0, attn_logit_softcapping=50.0)
DEFAULT_WINDOW = 4096      # Gemma2Config's sliding_window (an explicit null turns it off)


def detect(names: set[str]) -> bool:
    # sandwich norms without q/k norms (Gemma 3 has both)
    return any(n.endswith("pre_feedforward_layernorm.weight") for n in names) and \
        not any(n.endswith("self_attn.q_norm.weight") for n in names)


def softcap(cfg: dict, key: str, source: str) -> float:
    """A soft-capping value: null (or absent with a null default) turns it off."""
    return 0.0 if cfg.get(key) is None else number(cfg, key, source, 0.0, positive=True)


def gemma_decoder(cfg: dict, source: str, names: set[str], family: str, **overrides) -> ModelConfig:
    """What Gemma 2 and 3 share: Gemma's norms, scale and GeGLU, sandwich norms, the scores'
    scale, bias-free projections (`cfg` has its class's defaults filled in)."""
    if flag(cfg, "use_bidirectional_attention", source, False):
        raise ModelError(f"{source}: use_bidirectional_attention=true (an embedding model) is not supported")
    d_model = integer(cfg, "hidden_size", source)
    fields = dict(activation=activation(cfg, "hidden_activation", source, "gelu_pytorch_tanh", ACTIVATIONS),
                  embed_scale=float(np.float32(d_model ** 0.5)), norm="sandwich",
                  query_scale=number(cfg, "query_pre_attn_scalar", source, 256, positive=True),
                  mlp_bias=False, qk_norm=False)
    fields.update(overrides)
    return decoder_config(cfg, source, names, family, **fields)


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    window = cfg.get("sliding_window", DEFAULT_WINDOW)
    cfg = with_defaults(cfg, DEFAULTS)
    n_layer = integer(cfg, "num_hidden_layers", source)
    local = sliding_layers(cfg, source, n_layer,
                           ("sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layer)))
    return gemma_decoder(cfg, source, names, "gemma2",
                         attn_softcap=softcap(cfg, "attn_logit_softcapping", source),
                         final_softcap=softcap(cfg, "final_logit_softcapping", source),
                         **window_fields({"sliding_window": window}, source, local))


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    keys = branch_norm_keymap(decoder_keymap(config, norm_transform=ADD_ONE), config,
                              "post_attention_layernorm", "pre_feedforward_layernorm",
                              "post_feedforward_layernorm", ADD_ONE)
    return prefixed(keys, strip_prefix(names, PREFIXES), ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    raise ModelError("a Gemma 2 checkpoint (sandwich norms, no q/k norms) without its config.json: "
                     "soft-capping, query_pre_attn_scalar, the window and the local/global layers are "
                     "not in the tensors; put the model's config.json beside the file")
