"""Multi-head latent attention (DeepSeek-V2; the attention of DeepSeek V3/R1), one small pure
function a step, in transformers' order (modeling_deepseek_v2.DeepseekV2Attention):

    q            = x · W_q                                  [n_head, n, d_nope + d_rope]
                   (or q_b(RMSNorm(q_a(x))) when q_lora_rank: DeepSeek-V2, not V2-Lite)
    latent, k_r  = split(x · W_kv_a)                        [n, kv_lora_rank], [n, d_rope]
    c_kv         = RMSNorm(latent)                          what the KV cache keeps per token,
    k_rope       = rotate(k_r, pos)                         with k_rope (one for every head)
    k_nope, v    = split(c_kv · W_kv_b) per head            [n_head, n, d_nope], [n_head, n, d_v]
    k            = [k_nope | k_rope]                        the rotated part shared by the heads
    q            = [q_nope | rotate(q_rope, pos)]
    scores       = q·kᵀ · (d_nope + d_rope)^-1/2 · mscale²  (forward.attend, as every model)

The rotation turns only the last d_rope dims of q and k, as neighbouring pairs (rotary.turn:
ops.rotate_tail_pairs). So a position changes d_rope of a key's numbers; the rest of every key
and all of every value come from the latent: the cache holds kv_lora_rank + d_rope numbers a
token and layer instead of n_head · (d_nope + d_rope + d_v) (for DeepSeek-V2-Lite 576 instead
of 16·320 = 5,120).

Parameters (core/model/params.py): h.{i}.attn.q.w [d_model, n_head·d_head] (or q_a.w,
q_a_norm.g, q_b.w), kv_a.w [d_model, kv_lora_rank + d_rope], kv_a_norm.g [kv_lora_rank],
kv_b.w [kv_lora_rank, n_head·(d_nope + d_v)], o.w [n_head·d_v, d_model].

Recorded (forward.attention): attn_in; kv_latent [n, kv_lora_rank] (c_kv of the pass's new
positions) and k_rope [n, d_rope] (rotated); q_unrotated, k_unrotated (the new positions'), then
attend's q, k, v over every key (the cached positions' rebuilt from their latents)."""
from __future__ import annotations

import numpy as np

from . import ops
from .config import ModelConfig
from .layer_context import layer_context
from .params import linear
from .rotary import turn

# transformers' DeepseekV2RMSNorm of the latents (q_a_layernorm, kv_a_layernorm) keeps its
# default eps, not the config's rms_norm_eps
LATENT_NORM_EPS = 1e-6


def d_nope(config: ModelConfig) -> int:
    """Width of the part of a q/k head without positions (qk_nope_head_dim)."""
    return config.d_head - config.d_rotary


def project_q(params, config: ModelConfig, x, layer: int):
    # [n, d_model] -> q [n_head, n, d_head] before the rotation: x·W_q, or through the
    # low-rank latent q_b(RMSNorm(q_a(x)))
    p = f"h.{layer}.attn."
    if config.q_lora_rank:
        latent = linear(params, p + "q_a.w", x, None)
        q = linear(params, p + "q_b.w", ops.rms_norm(latent, params[p + "q_a_norm.g"], LATENT_NORM_EPS)[1], None)
    else:
        q = linear(params, p + "q.w", x, None)
    return ops.split_heads(q, config.n_head)


def compress(params, config: ModelConfig, x, layer: int):
    # [n, d_model] -> (c_kv [n, kv_lora_rank], k_rope [n, d_rope] not yet rotated): x·W_kv_a
    # split, the latent RMS-normed; one latent per token, for every head
    p = f"h.{layer}.attn."
    both = linear(params, p + "kv_a.w", x, None)
    latent, k_rope = both[:, :config.kv_lora_rank], both[:, config.kv_lora_rank:]
    return ops.rms_norm(latent, params[p + "kv_a_norm.g"], LATENT_NORM_EPS)[1], np.ascontiguousarray(k_rope)


def expand(params, config: ModelConfig, c_kv, layer: int):
    # [n, kv_lora_rank] -> (k_nope [n_head, n, d_nope], v [n_head, n, d_v]): c_kv·W_kv_b per head
    both = ops.split_heads(linear(params, f"h.{layer}.attn.kv_b.w", c_kv, None), config.n_head)
    nope = d_nope(config)
    return np.ascontiguousarray(both[..., :nope]), np.ascontiguousarray(both[..., nope:])


def keys(k_nope, k_rope):
    # [n_head, n, d_nope], [n, d_rope] -> [n_head, n, d_nope + d_rope]: every head's key, the
    # position part the same for all of them
    n_head, n, _ = k_nope.shape
    return np.concatenate([k_nope, np.broadcast_to(k_rope, (n_head, n, k_rope.shape[-1]))], axis=-1)


def qkv(params, config: ModelConfig, x, layer: int, ctx):
    # Stage 5 of a latent-attention model. [n, d_model] -> q [n_head, n, d_head], k [n_head, n,
    # d_head], v [n_head, n, d_v] (no cache: every position's)
    ctx = layer_context(config, ctx, layer)
    q = project_q(params, config, x, layer)
    c_kv, k_rope = compress(params, config, x, layer)
    if ctx.cos is not None:
        q, k_rope = turn(config, q, ctx.cos, ctx.sin), ops.rotate_tail_pairs(k_rope, ctx.cos, ctx.sin)
    k_nope, v = expand(params, config, c_kv, layer)
    return q, keys(k_nope, k_rope), v
