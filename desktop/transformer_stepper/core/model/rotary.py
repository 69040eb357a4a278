"""Rotary positions: the radians per position of each rotated pair (with the family's scaling),
cos and sin of the angles, and what of a text's length the frequencies depend on. The angles
of a text and the rotation itself: core/model/layer_context.py and ops.rotate."""
from __future__ import annotations

import numpy as np

from . import ops
from .config import ModelConfig

F32 = np.float32


def rope_frequencies(config: ModelConfig, n_seq: int = 0, local: bool = False) -> np.ndarray:
    # [d_rotary // 2]: radians per position of each rotated pair, for a text of n_seq tokens
    # (dynamic and longrope scaling change with the length; 0: a short text's); local=True: the
    # local layers' own base, unscaled, where the model has one (Gemma 3's rope_local_base_freq)
    d, theta, kind = config.d_rotary, config.rope_theta, config.rope_scaling
    if local and config.rope_local_theta:
        return ops.rope_frequencies(d, config.rope_local_theta)
    if kind == "dynamic":
        return ops.dynamic_rope_frequencies(d, theta, config.rope_factor, config.rope_original_n_ctx, n_seq)
    if kind == "yarn":
        return ops.yarn_rope_frequencies(d, theta, config.rope_factor, config.rope_original_n_ctx,
                                         config.rope_beta_fast, config.rope_beta_slow, config.rope_truncate)
    if kind == "longrope":
        long = n_seq > config.rope_original_n_ctx
        return ops.longrope_frequencies(d, theta, config.rope_long_factor if long else config.rope_short_factor)
    return ops.rope_frequencies(d, theta, kind, config.rope_factor, config.rope_low_freq_factor,
                                config.rope_high_freq_factor, config.rope_original_n_ctx)


def rope_length_key(config: ModelConfig, n_seq: int):
    """What of a text's length its rotary frequencies depend on: None for most models; for
    dynamic and longrope scaling, past the original context, the length itself (dynamic) or
    just that it is past (longrope). Rows computed at lengths with different keys differ,
    so a KV cache or shared rows are reused only under the same key (else: re-traced)."""
    if config.position != "rotary" or n_seq <= config.rope_original_n_ctx:
        return None
    if config.rope_scaling == "dynamic":
        return n_seq
    return "long" if config.rope_scaling == "longrope" else None


def rope_cos_sin(config: ModelConfig, angles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # [n, d_rotary // 2] angles -> cos, sin; yarn and longrope multiply both by their attention
    # factor (so rotated q·k grows by its square), as transformers does
    cos, sin = np.cos(angles), np.sin(angles)
    if config.rope_attention_factor != 1.0:
        factor = F32(config.rope_attention_factor)
        cos, sin = cos * factor, sin * factor
    return cos, sin


def turn(config: ModelConfig, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    # [h, n, d_head] -> the same turned by the positions' angles, as this model rotates q and k:
    # the first d_rotary dims in Hugging Face's rotate_half layout (ops.rotate), or latent
    # attention's rotated tail as neighbouring pairs (ops.rotate_tail_pairs: DeepSeek-V2)
    if config.is_mla:
        return ops.rotate_tail_pairs(x, cos, sin)
    return ops.rotate(x, cos, sin)
