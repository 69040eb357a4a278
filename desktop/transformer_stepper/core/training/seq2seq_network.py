"""Training forward/backward for the encoder–decoder the built-in translator uses: Marian's
layout ("Attention Is All You Need": post-LN blocks, ReLU, sinusoidal positions added to the
token rows, a tied head plus final_logits_bias), batched with padding masks.

Parameter names are core/model/seq2seq.py's (encoder.h.0.attn.q.w, decoder.h.0.cross.q.w, ...), so the
trained dictionary is what the app's pass reads; the sinusoid tables (encoder.wpe, decoder.wpe)
are computed, never trained (io/families/marian.computed_params). A test proves the logits equal
the app's Seq2SeqModel's on single pairs, and checks every gradient against finite differences."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..model import ops
from ..model.seq2seq import Seq2SeqConfig, expected_seq2seq_shapes
from . import layers

_ATTN = ("q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "o.w", "o.b")
COMPUTED = ("encoder.wpe", "decoder.wpe")


def init_params(config: Seq2SeqConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """N(0, 0.02) matrices, the token table N(0, 0.3) (see network.init_params), gains 1,
    biases 0; the position tables are left out (computed)."""
    params = {}
    for name, shape in expected_seq2seq_shapes(config).items():
        if name in COMPUTED:
            continue
        if name == "wte":
            value = rng.normal(0.0, 0.3, size=shape)
        elif name.endswith(".g"):
            value = np.ones(shape)
        elif name.endswith(".b") or name == "final_logits_bias":
            value = np.zeros(shape)
        else:
            value = rng.normal(0.0, 0.02, size=shape)
        params[name] = value.astype(np.float32)
    return params


# ------------------------------------------------------------------------------ cross-attention
def cross_attention_forward(x, memory, w: dict, n_head: int, mask):
    """q from x [batch, n_tgt, d], k and v from memory [batch, n_src, d]; mask [batch, 1, 1,
    n_src] additive (the source's padding) -> out, cache. forward.attend's operations, batched."""
    q = layers.split_heads(ops.linear(x, w["q.w"], w["q.b"]), n_head)
    k = layers.split_heads(ops.linear(memory, w["k.w"], w["k.b"]), n_head)
    v = layers.split_heads(ops.linear(memory, w["v.w"], w["v.b"]), n_head)
    scale = x.dtype.type(1.0 / np.sqrt(q.shape[-1]))
    scores = (q @ k.transpose(0, 1, 3, 2)) * scale
    if mask is not None:
        scores = scores + mask
    weights = ops.softmax(scores)
    heads_concat = layers.merge_heads(weights @ v)
    return ops.linear(heads_concat, w["o.w"], w["o.b"]), (x, memory, q, k, v, weights, heads_concat, scale)


def cross_attention_backward(dout, w: dict, cache):
    """-> dx, dmemory, {q,k,v,o}.{w,b} gradients."""
    x, memory, q, k, v, weights, heads_concat, scale = cache
    grads = {}
    dconcat, grads["o.w"], grads["o.b"] = layers.linear_backward(heads_concat, w["o.w"], dout)
    dheads = layers.split_heads(dconcat, q.shape[1])
    dweights = dheads @ v.transpose(0, 1, 3, 2)
    dv = weights.transpose(0, 1, 3, 2) @ dheads
    dscores = weights * (dweights - np.sum(dweights * weights, axis=-1, keepdims=True)) * scale
    dq, dk = dscores @ k, dscores.transpose(0, 1, 3, 2) @ q
    dx, grads["q.w"], grads["q.b"] = layers.linear_backward(x, w["q.w"], layers.merge_heads(dq))
    dmem_k, grads["k.w"], grads["k.b"] = layers.linear_backward(memory, w["k.w"], layers.merge_heads(dk))
    dmem_v, grads["v.w"], grads["v.b"] = layers.linear_backward(memory, w["v.w"], layers.merge_heads(dv))
    return dx, dmem_k + dmem_v, grads


# ------------------------------------------------------------------------------ blocks (post-LN)
def _sub(params, p, name):
    return {n: params[f"{p}{name}.{n}"] for n in _ATTN}


def _post_norm(params, p, ln, x, eps):
    return layers.layer_norm_forward(x, params[f"{p}{ln}.g"], params[f"{p}{ln}.b"], eps)


def _ffn_forward(params, p, x):
    pre = ops.linear(x, params[p + "mlp.fc.w"], params[p + "mlp.fc.b"])
    act = layers.activation_forward("relu", pre)
    return ops.linear(act, params[p + "mlp.proj.w"], params[p + "mlp.proj.b"]), (x, pre, act)


def _ffn_backward(params, p, dy, cache, grads):
    x, pre, act = cache
    dact, grads[p + "mlp.proj.w"], grads[p + "mlp.proj.b"] = layers.linear_backward(act, params[p + "mlp.proj.w"], dy)
    dpre = layers.activation_backward("relu", pre, dact)
    dx, grads[p + "mlp.fc.w"], grads[p + "mlp.fc.b"] = layers.linear_backward(x, params[p + "mlp.fc.w"], dpre)
    return dx


def _layer_forward(params, config, p, x, self_mask, memory=None, cross_mask=None):
    """One post-LN block: x = LN(x + sublayer(x)) for self-attention, [cross-attention],
    feed-forward. -> x, caches."""
    n_head, eps = config.encoder.n_head, config.encoder.ln_eps
    caches = []
    out, c = layers.attention_forward(x, _sub(params, p, "attn"), n_head, self_mask)
    x, ln = _post_norm(params, p, "ln_1", x + out, eps)
    caches.append(("attn", "ln_1", c, ln))
    if memory is not None:
        out, c = cross_attention_forward(x, memory, _sub(params, p, "cross"), n_head, cross_mask)
        x, ln = _post_norm(params, p, "ln_cross", x + out, eps)
        caches.append(("cross", "ln_cross", c, ln))
    out, c = _ffn_forward(params, p, x)
    x, ln = _post_norm(params, p, "ln_2", x + out, eps)
    caches.append(("mlp", "ln_2", c, ln))
    return x, caches


def _layer_backward(params, p, dx, caches, grads):
    """-> dx into the block, dmemory (None without cross-attention)."""
    dmemory = None
    for kind, ln_name, cache, ln_cache in reversed(caches):
        dsum, grads[f"{p}{ln_name}.g"], grads[f"{p}{ln_name}.b"] = layers.layer_norm_backward(dx, ln_cache)
        if kind == "mlp":
            dx = dsum + _ffn_backward(params, p, dsum, cache, grads)
        elif kind == "cross":
            din, dmemory, g = cross_attention_backward(dsum, _sub(params, p, "cross"), cache)
            grads.update({f"{p}cross.{n}": v for n, v in g.items()})
            dx = dsum + din
        else:
            din, g = layers.attention_backward(dsum, _sub(params, p, "attn"), cache)
            grads.update({f"{p}attn.{n}": v for n, v in g.items()})
            dx = dsum + din
    return dx, dmemory


# ------------------------------------------------------------------------------ the pass
def _embed(params, positions, ids):
    return params["wte"][ids] + positions[:ids.shape[1]]


def forward_batch(params: Mapping[str, np.ndarray], config: Seq2SeqConfig, positions: np.ndarray,
                  source_ids, source_valid, decoder_ids):
    """[batch, n_src] ids, [batch, n_src] bool, [batch, n_tgt] decoder input ids ->
    (logits [batch, n_tgt, n_vocab], cache). `positions`: the sinusoid table [n_ctx, d]."""
    key_mask = ops.additive_mask(~source_valid)[:, None, None, :].astype(np.float32)
    x = _embed(params, positions, source_ids)
    enc_caches = []
    for i in range(config.encoder.n_layer):
        x, c = _layer_forward(params, config, f"encoder.h.{i}.", x, key_mask)
        enc_caches.append(c)
    memory = x
    causal = ops.additive_mask(ops.causal_mask(decoder_ids.shape[1]))
    y = _embed(params, positions, decoder_ids)
    dec_caches = []
    for i in range(config.decoder.n_layer):
        y, c = _layer_forward(params, config, f"decoder.h.{i}.", y, causal, memory, key_mask)
        dec_caches.append(c)
    logits = y @ params["wte"].T + params["final_logits_bias"]
    return logits, (source_ids, decoder_ids, enc_caches, dec_caches, y)


def backward_batch(params, config: Seq2SeqConfig, cache, dlogits) -> dict[str, np.ndarray]:
    source_ids, decoder_ids, enc_caches, dec_caches, y = cache
    grads: dict[str, np.ndarray] = {}
    n_vocab = dlogits.shape[-1]
    grads["final_logits_bias"] = dlogits.reshape(-1, n_vocab).sum(axis=0)
    dwte = dlogits.reshape(-1, n_vocab).T @ y.reshape(-1, y.shape[-1])
    dy = dlogits @ params["wte"]
    dmemory = 0.0
    for i in reversed(range(config.decoder.n_layer)):
        dy, dm = _layer_backward(params, f"decoder.h.{i}.", dy, dec_caches[i], grads)
        dmemory = dmemory + dm
    np.add.at(dwte, decoder_ids.reshape(-1), dy.reshape(-1, dy.shape[-1]))
    dx = dmemory
    for i in reversed(range(config.encoder.n_layer)):
        dx, _ = _layer_backward(params, f"encoder.h.{i}.", dx, enc_caches[i], grads)
    np.add.at(dwte, source_ids.reshape(-1), dx.reshape(-1, dx.shape[-1]))
    grads["wte"] = dwte
    return grads


def loss_and_grads(params, config: Seq2SeqConfig, positions, source_ids, source_valid,
                   decoder_ids, labels, weights):
    logits, cache = forward_batch(params, config, positions, source_ids, source_valid, decoder_ids)
    loss, dlogits = layers.cross_entropy(logits, labels, weights)
    return loss, backward_batch(params, config, cache, dlogits)
