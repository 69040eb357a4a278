"""The training forward pass (batched, keeping what backward needs) and its backward pass.

Covers the architecture the built-in model uses and its position variants: token embedding
with sinusoidal or learned positions added, sinusoids concatenated ([e | p]), q and k rotated
(rotary), or no positions at all; pre-LN blocks of causal multi-head attention and a
feed-forward, the final LayerNorm, and the LM head tied to wte (or untied). Parameter names
are core/model/forward.py's, so the trained dictionary loads into the app unchanged; a test proves
the logits equal core.model.forward.forward's on single sequences, for every position scheme."""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from ..model import ops
from ..model.config import ModelConfig
from ..model.errors import ModelError
from ..model.head import head_input
from ..model.layer_context import context
from ..model.params import expected_shapes
from . import layers

_ATTN = ("q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "o.w", "o.b")


def check_trainable(config: ModelConfig) -> None:
    """The training code covers a subset of the configs the forward pass reads."""
    unsupported = []
    if config.norm != "pre":
        unsupported.append("post-LN blocks")
    if config.embed_norm or config.n_token_types or config.lm_head_transform:
        unsupported.append("BERT's embedding LayerNorm, token types or MLM head")
    if not (config.lm_head and config.final_norm):
        unsupported.append("a model without ln_f and the tied LM head")
    if config.activation not in ("relu", "gelu_tanh"):
        unsupported.append(f"activation {config.activation}")
    if config.norm_kind != "layer":
        unsupported.append("RMSNorm")
    if (config.gated_mlp or config.qk_norm or config.n_kv_heads != config.n_head
            or config.d_head * config.n_head != config.d_model):
        unsupported.append("gated feed-forwards, q/k norms, grouped-query attention or a custom head width")
    if not (config.qkv_bias and config.o_bias and config.mlp_bias):
        unsupported.append("projections without biases")
    if config.sliding_window or config.embed_scale != 1.0 or config.position_offset:
        unsupported.append("sliding windows, embedding scales or position offsets")
    if unsupported:
        raise ModelError(f"config: training does not support {', '.join(unsupported)}")


def init_params(config: ModelConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """GPT-2's initialisation: N(0, 0.02) matrices, residual projections scaled by
    1/sqrt(2 n_layer), LayerNorm gains 1, biases 0. wte starts larger (std 0.3): the forward
    pass adds it to sinusoids of amplitude 1 with no sqrt(d_model) scaling, and at 0.02 the
    tokens would start drowned by the positions (0.3 reached a given loss sooner than 0.05)."""
    check_trainable(config)
    params: dict[str, np.ndarray] = {}
    residual_std = 0.02 / np.sqrt(2 * config.n_layer)
    for name, shape in expected_shapes(config).items():
        if name == "wte":
            value = rng.normal(0.0, 0.3, size=shape)
        elif name.endswith(".g"):
            value = np.ones(shape)
        elif name.endswith(".b"):
            value = np.zeros(shape)
        elif name.endswith(("attn.o.w", "mlp.proj.w")):
            value = rng.normal(0.0, residual_std, size=shape)
        else:
            value = rng.normal(0.0, 0.02, size=shape)
        params[name] = value.astype(np.float32)
    return params


def _block_forward(params, config: ModelConfig, x, ctx, layer: int):
    p = f"h.{layer}."
    ln_1, ln_1_cache = layers.layer_norm_forward(x, params[p + "ln_1.g"], params[p + "ln_1.b"], config.ln_eps)
    attn_params = {name: params[p + "attn." + name] for name in _ATTN}
    attn_out, attn_cache = layers.attention_forward(ln_1, attn_params, config.n_head, ctx.mask,
                                                    ctx.cos, ctx.sin)
    x = x + attn_out
    ln_2, ln_2_cache = layers.layer_norm_forward(x, params[p + "ln_2.g"], params[p + "ln_2.b"], config.ln_eps)
    pre_act = ops.linear(ln_2, params[p + "mlp.fc.w"], params[p + "mlp.fc.b"])
    act = layers.activation_forward(config.activation, pre_act)
    x = x + ops.linear(act, params[p + "mlp.proj.w"], params[p + "mlp.proj.b"])
    return x, (ln_1_cache, attn_params, attn_cache, ln_2_cache, ln_2, pre_act, act)


def _block_backward(params, config: ModelConfig, dx, cache, layer: int, grads: dict) -> np.ndarray:
    p = f"h.{layer}."
    ln_1_cache, attn_params, attn_cache, ln_2_cache, ln_2, pre_act, act = cache
    # x_out = x_mid + proj(act(fc(ln_2(x_mid))))
    dact, grads[p + "mlp.proj.w"], grads[p + "mlp.proj.b"] = layers.linear_backward(
        act, params[p + "mlp.proj.w"], dx)
    dpre = layers.activation_backward(config.activation, pre_act, dact)
    dln_2, grads[p + "mlp.fc.w"], grads[p + "mlp.fc.b"] = layers.linear_backward(
        ln_2, params[p + "mlp.fc.w"], dpre)
    dmid, grads[p + "ln_2.g"], grads[p + "ln_2.b"] = layers.layer_norm_backward(dln_2, ln_2_cache)
    dx = dx + dmid
    # x_mid = x_in + attn(ln_1(x_in))
    dln_1, attn_grads = layers.attention_backward(dx, attn_params, attn_cache)
    for name, value in attn_grads.items():
        grads[p + "attn." + name] = value
    din, grads[p + "ln_1.g"], grads[p + "ln_1.b"] = layers.layer_norm_backward(dln_1, ln_1_cache)
    return dx + din


def embed_batch(params: Mapping[str, np.ndarray], config: ModelConfig, input_ids: np.ndarray):
    """[batch, n_seq] ids -> x0 [batch, n_seq, d_model], as core.model.forward.embed computes it."""
    n_seq = input_ids.shape[1]
    e = params["wte"][input_ids]                            # one-hot x E
    if config.position in ("rotary", "none"):               # nothing added at the input
        return e
    if config.position == "learned":
        return e + params["wpe"][:n_seq]
    width = config.d_position if config.position == "concat" else config.d_model
    positions = ops.sinusoid_table(n_seq, width).astype(e.dtype)
    if config.position == "sinusoidal":
        return e + positions
    return np.concatenate([e, np.broadcast_to(positions, (len(input_ids), n_seq, width))], axis=-1)


def forward_batch(params: Mapping[str, np.ndarray], config: ModelConfig, input_ids: np.ndarray):
    """[batch, n_seq] ids -> (logits [batch, n_seq, n_vocab], cache for backward_batch)."""
    input_ids = np.asarray(input_ids, dtype=np.int64)
    x = embed_batch(params, config, input_ids)
    ctx = context(config, input_ids.shape[1])               # the app's mask and rotary angles
    block_caches = []
    for layer in range(config.n_layer):
        x, cache = _block_forward(params, config, x, ctx, layer)
        block_caches.append(cache)
    h, ln_f_cache = layers.layer_norm_forward(x, params["ln_f.g"], params["ln_f.b"], config.ln_eps)
    logits = head_input(config, h) @ _head_table(params, config).T
    return logits, (input_ids, block_caches, ln_f_cache, h)


def _head_table(params, config: ModelConfig) -> np.ndarray:
    return params["wte"] if config.tied_head else params["lm_head.w"]


def backward_batch(params: Mapping[str, np.ndarray], config: ModelConfig, cache, dlogits,
                   wte_parts: Optional[dict] = None) -> dict:
    """Gradients of every parameter given d(loss)/d(logits) [batch, n_seq, n_vocab].
    `wte_parts`, when given, receives the two summands of grads["wte"]: "head" (through the
    tied LM head, every row; zero when the head is untied) and "lookup" (through the row
    selection, only the batch's ids)."""
    input_ids, block_caches, ln_f_cache, h = cache
    grads: dict[str, np.ndarray] = {}
    d_model, d_token = config.d_model, config.d_token
    head_in = head_input(config, h)
    dhead = dlogits.reshape(-1, dlogits.shape[-1]).T @ head_in.reshape(-1, head_in.shape[-1])
    dh_read = dlogits @ _head_table(params, config)
    if dh_read.shape[-1] == d_model:
        dh = dh_read
    else:                                                   # a tied concat head reads the token part
        dh = np.zeros(h.shape, dtype=h.dtype)
        dh[..., :d_token] = dh_read
    dx, grads["ln_f.g"], grads["ln_f.b"] = layers.layer_norm_backward(dh, ln_f_cache)
    for layer in reversed(range(config.n_layer)):
        dx = _block_backward(params, config, dx, block_caches[layer], layer, grads)
    if config.tied_head:
        dwte = dhead
    else:
        grads["lm_head.w"] = dhead
        dwte = np.zeros_like(params["wte"])
    # row selection, scattered back; under concat only the token part came from wte
    token_part = dx[..., :d_token].reshape(-1, d_token)
    if wte_parts is not None:
        wte_parts["head"] = dwte.copy()
        lookup = np.zeros_like(dwte)
        np.add.at(lookup, input_ids.reshape(-1), token_part)
        wte_parts["lookup"] = lookup
    np.add.at(dwte, input_ids.reshape(-1), token_part)
    grads["wte"] = dwte
    if config.position == "learned":
        dwpe = np.zeros_like(params["wpe"])
        dwpe[:input_ids.shape[1]] = dx.sum(axis=0)
        grads["wpe"] = dwpe
    return grads


def loss_and_grads(params, config: ModelConfig, input_ids, targets, weights,
                   wte_parts: Optional[dict] = None):
    """Mean next-token cross-entropy over weighted positions, and every parameter's gradient
    (`wte_parts`: see backward_batch)."""
    logits, cache = forward_batch(params, config, input_ids)
    loss, dlogits = layers.cross_entropy(logits, targets, weights)
    return loss, backward_batch(params, config, cache, dlogits, wte_parts)
