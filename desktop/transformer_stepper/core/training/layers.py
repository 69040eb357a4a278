"""Forward/backward pairs for each layer type, batched over a leading `batch` axis.

The forward halves call `core.model.ops` (the functions `core.model.forward` uses), so a trained model
computes in the app exactly what it computed in training; each returns what its backward
half needs. Shapes: batch, n_seq, d_model, n_head, d_head, d_ff, n_vocab."""
from __future__ import annotations

import numpy as np

from ..model import ops

F32 = np.float32


# ------------------------------------------------------------------------------ linear
def linear_backward(x, w, dy, need_dx: bool = True):
    # [..., d_in], [d_in, d_out], [..., d_out] -> dx [..., d_in] (or None), dw, db
    x2 = x.reshape(-1, x.shape[-1])
    dy2 = dy.reshape(-1, dy.shape[-1])
    dw = x2.T @ dy2
    db = dy2.sum(axis=0)
    dx = (dy @ w.T) if need_dx else None
    return dx, dw, db


# ------------------------------------------------------------------------------ layer norm
def layer_norm_forward(x, g, b, eps):
    # [..., d] -> out [..., d], cache; ops.layer_norm gives the output, rstd is kept for backward
    normalized, out = ops.layer_norm(x, g, b, eps)
    centred = x - x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(np.mean(np.square(centred), axis=-1, keepdims=True) + x.dtype.type(eps))
    return out, (normalized, rstd, g)


def layer_norm_backward(dy, cache):
    # [..., d] -> dx [..., d], dg [d], db [d]
    normalized, rstd, g = cache
    d = normalized.shape[-1]
    dg = (dy * normalized).reshape(-1, d).sum(axis=0)
    db = dy.reshape(-1, d).sum(axis=0)
    dnorm = dy * g
    dx = dnorm - dnorm.mean(axis=-1, keepdims=True)
    dx -= normalized * np.mean(dnorm * normalized, axis=-1, keepdims=True)
    dx *= rstd
    return dx, dg, db


# ------------------------------------------------------------------------------ activations
def activation_forward(name: str, x):
    return ops.ACTIVATIONS[name](x)


def activation_backward(name: str, x, dy):
    # d act(x) / dx * dy, from the pre-activation x
    if name == "relu":
        return dy * (x > 0)
    if name == "gelu_tanh":
        c = x.dtype.type(np.sqrt(2.0 / np.pi))
        cubic = x.dtype.type(0.044715)
        t = np.tanh(c * (x + cubic * x * x * x))
        dinner = c * (1.0 + 3.0 * cubic * x * x)
        return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner)
    raise ValueError(f"training supports relu and gelu_tanh activations, not {name!r}")


# ------------------------------------------------------------------------------ attention
def split_heads(x, n_head: int):
    # [batch, n_seq, d_model] -> [batch, n_head, n_seq, d_head]
    batch, n_seq, d_model = x.shape
    return x.reshape(batch, n_seq, n_head, d_model // n_head).transpose(0, 2, 1, 3)


def merge_heads(x):
    # [batch, n_head, n_seq, d_head] -> [batch, n_seq, d_model]
    batch, n_head, n_seq, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, n_seq, n_head * d_head)


def attention_forward(x, w: dict, n_head: int, mask, cos=None, sin=None):
    """[batch, n_seq, d_model], {q,k,v,o}.{w,b}, [n_seq, n_seq] additive mask (0 / -inf,
    ops.additive_mask) or None, and for rotary positions cos, sin [n_seq, d_head // 2]
    (core.model.layer_context.context's) -> out, cache.

    Same operations in the same order as core.model.forward.attention, with a batch axis."""
    q = split_heads(ops.linear(x, w["q.w"], w["q.b"]), n_head)
    k = split_heads(ops.linear(x, w["k.w"], w["k.b"]), n_head)
    if cos is not None:                                # rotary: turn q and k per head
        q, k = ops.rotate(q, cos, sin), ops.rotate(k, cos, sin)
    v = split_heads(ops.linear(x, w["v.w"], w["v.b"]), n_head)
    scale = x.dtype.type(1.0 / np.sqrt(q.shape[-1]))
    scores = (q @ k.transpose(0, 1, 3, 2)) * scale     # [batch, n_head, n_seq, n_seq]
    if mask is not None:
        scores += mask
    weights = ops.softmax(scores)
    heads_concat = merge_heads(weights @ v)            # [batch, n_seq, d_model]
    out = ops.linear(heads_concat, w["o.w"], w["o.b"])
    return out, (x, q, k, v, weights, heads_concat, scale, cos, sin)


def attention_backward(dout, w: dict, cache):
    # [batch, n_seq, d_model] -> dx, {q,k,v,o}.{w,b} gradients
    x, q, k, v, weights, heads_concat, scale, cos, sin = cache
    grads = {}
    dconcat, grads["o.w"], grads["o.b"] = linear_backward(heads_concat, w["o.w"], dout)
    dheads = split_heads(dconcat, q.shape[1])          # [batch, n_head, n_seq, d_head]
    dweights = dheads @ v.transpose(0, 1, 3, 2)
    dv = weights.transpose(0, 1, 3, 2) @ dheads
    # softmax backward; blocked entries have weight 0, so their gradient is 0 too
    dscores = weights * (dweights - np.sum(dweights * weights, axis=-1, keepdims=True))
    dscores *= scale
    dq = dscores @ k
    dk = dscores.transpose(0, 1, 3, 2) @ q
    if cos is not None:
        # the rotation is orthogonal: its transpose, a turn by minus the angle, carries the
        # gradients of the rotated q and k back to the projections
        dq, dk = ops.rotate(dq, cos, -sin), ops.rotate(dk, cos, -sin)
    dx = None
    for name, dproj in (("q", dq), ("k", dk), ("v", dv)):
        dxi, grads[f"{name}.w"], grads[f"{name}.b"] = linear_backward(x, w[f"{name}.w"], merge_heads(dproj))
        dx = dxi if dx is None else dx + dxi
    return dx, grads


# ------------------------------------------------------------------------------ loss
def cross_entropy(logits, targets, weights):
    """[batch, n_seq, n_vocab], [batch, n_seq] ids, [batch, n_seq] 0/1 -> (mean loss, dlogits).

    The mean is over the weighted positions (padding has weight 0)."""
    n_vocab = logits.shape[-1]
    flat = logits.reshape(-1, n_vocab)
    flat_targets = targets.reshape(-1)
    flat_weights = weights.reshape(-1).astype(logits.dtype)
    total = max(float(flat_weights.sum()), 1.0)
    shifted = flat - flat.max(axis=-1, keepdims=True)
    log_norm = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    log_probs = shifted - log_norm
    rows = np.arange(len(flat_targets))
    loss = -float(np.sum(log_probs[rows, flat_targets] * flat_weights)) / total
    dlogits = np.exp(log_probs)
    dlogits[rows, flat_targets] -= 1.0
    dlogits *= (flat_weights / logits.dtype.type(total))[:, None]
    return loss, dlogits.reshape(logits.shape)
