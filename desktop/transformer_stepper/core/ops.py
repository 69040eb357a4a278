"""Small pure functions, float32 in and out. Shapes use one vocabulary:
n_seq, d_model, n_head, d_head, d_ff, n_vocab, n_ctx."""
from __future__ import annotations

import numpy as np

F32 = np.float32

# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7 on all reals, below float32's own
# rounding for GELU's purposes, and it needs one exp instead of a series. numpy has no erf.
_ERF_P = F32(0.3275911)
_ERF_A = tuple(F32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_SQRT_HALF = F32(np.sqrt(0.5))
_SQRT_2_OVER_PI = F32(np.sqrt(2.0 / np.pi))
_GELU_CUBIC = F32(0.044715)


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    # [..., d_in], [d_in, d_out], [d_out] -> [..., d_out]
    y = x @ w
    if b is not None:
        y += b
    return y


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float):
    # [n_seq, d], [d], [d] -> (normalized [n_seq, d] before the affine part, output [n_seq, d])
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = np.mean(np.square(centred), axis=-1, keepdims=True)
    normalized = centred * (1.0 / np.sqrt(variance + F32(eps)))
    return normalized, normalized * g + b


def erf(x: np.ndarray) -> np.ndarray:
    # [...] -> [...], float32
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + _ERF_P * a)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))))
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    return sign * (1.0 - poly)


def gelu_erf(x: np.ndarray) -> np.ndarray:
    # exact GELU, x * Phi(x) (BERT's "gelu")
    return x * (F32(0.5) + F32(0.5) * erf(x * _SQRT_HALF))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    # GPT-2's "gelu_new"; x*x*x rather than x**3, which numpy computes through pow
    inner = x * x
    inner *= _GELU_CUBIC * x
    inner += x
    inner *= _SQRT_2_OVER_PI
    np.tanh(inner, out=inner)
    inner += 1.0
    inner *= F32(0.5) * x
    return inner


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, F32(0))


ACTIVATIONS = {"gelu_erf": gelu_erf, "gelu_tanh": gelu_tanh, "relu": relu}


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    # [..., n] -> [..., n], rows sum to 1; -inf entries become exactly 0
    shifted = x - x.max(axis=axis, keepdims=True)
    np.exp(shifted, out=shifted)
    shifted /= shifted.sum(axis=axis, keepdims=True)
    return shifted


def causal_mask(n_seq: int) -> np.ndarray:
    # [n_seq, n_seq] bool, True where a query may NOT look (keys after it)
    return np.triu(np.ones((n_seq, n_seq), dtype=bool), k=1)


def additive_mask(blocked: np.ndarray) -> np.ndarray:
    # [n_seq, n_seq] bool -> [n_seq, n_seq] float32: 0 where a query may look, -inf where not
    return np.where(blocked, F32(-np.inf), F32(0))


def sinusoid_table(n_ctx: int, d_model: int) -> np.ndarray:
    # [n_ctx, d_model]; "Attention Is All You Need" 3.5: sin on even dims, cos on odd dims
    positions = np.arange(n_ctx, dtype=np.float64)[:, None]
    frequencies = 1.0 / (10000.0 ** (np.arange(0, d_model, 2, dtype=np.float64) / d_model))
    angles = positions * frequencies
    table = np.empty((n_ctx, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles)
    return table.astype(F32)


def split_heads(x: np.ndarray, n_head: int) -> np.ndarray:
    # [n_seq, d_model] -> [n_head, n_seq, d_head]
    n_seq, d_model = x.shape
    return x.reshape(n_seq, n_head, d_model // n_head).transpose(1, 0, 2)


def merge_heads(x: np.ndarray) -> np.ndarray:
    # [n_head, n_seq, d_head] -> [n_seq, d_model]
    n_head, n_seq, d_head = x.shape
    return x.transpose(1, 0, 2).reshape(n_seq, n_head * d_head)
