"""Small pure functions, float32 in and out. Shapes use one vocabulary:
n_seq, d_model, n_head, d_head, d_ff, n_vocab, n_ctx."""
from __future__ import annotations

import math

import numpy as np

F32 = np.float32


# Corrupt weights (inf, NaN) or extreme activations make numpy warn from deep inside an op,
# as several lines on stderr; the values themselves (inf, NaN) are what the trace should
# show, and callers check np.isfinite where they care. errstate is context-local, but one
# instance cannot be entered twice at once: make a new one per pass.
def quiet_floats() -> np.errstate:
    return np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore")


# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7 on all reals, below float32's own
# rounding for GELU's purposes, and it needs one exp instead of a series. numpy has no erf.
_ERF_P = F32(0.3275911)
_ERF_A = tuple(F32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_SQRT_HALF = F32(np.sqrt(0.5))
_SQRT_2_OVER_PI = F32(np.sqrt(2.0 / np.pi))
_GELU_CUBIC = F32(0.044715)
_HALF_ERF_A = tuple(a * F32(0.5) for a in _ERF_A)
FEW_ROWS = 128                   # linear: below this many rows, the weight goes on the left
_SOFTMAX_BLOCK = 1 << 18         # elements (1 MiB) of rows at a time
_GELU_BLOCK = 1 << 15            # elements: a block's five streams (128 KiB each) fit in L2


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    # [..., d_in], [d_in, d_out], [d_out] -> [..., d_out]
    if x.ndim == 2 and len(x) < FEW_ROWS:
        # few rows: OpenBLAS multiplies faster with the weight on the left, y.T = w.T @ x.T
        # (MiniLM, 16 rows, one thread: [384, 1536] 436 -> 256 us, [384, 384] 115 -> 67 us;
        # the whole pass 11.7 -> 8.5 ms; no gain from 128 rows on). The product comes out
        # transposed; adding the bias copies it back to rows.
        y_t = (w.T @ x.T).T
        if b is None:
            return np.ascontiguousarray(y_t)
        return np.add(y_t, b, out=np.empty(y_t.shape, dtype=y_t.dtype))
    y = x @ w
    if b is not None:
        y += b
    return y


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float):
    # [n_seq, d], [d], [d] -> (normalized [n_seq, d] before the affine part, output [n_seq, d]);
    # in place in two buffers (the same arithmetic as new arrays, so the same bits)
    centred = x - x.mean(axis=-1, keepdims=True)
    scratch = np.square(centred)
    variance = scratch.mean(axis=-1, keepdims=True)
    centred *= 1.0 / np.sqrt(variance + F32(eps))         # now the normalized part
    out = np.multiply(centred, g, out=scratch)
    out += b
    return centred, out


def rms_norm(x: np.ndarray, g: np.ndarray, eps: float):
    # [n_seq, d], [d] -> (normalized [n_seq, d] before the gain, output [n_seq, d]);
    # no mean is subtracted and there is no bias (Llama's RMSNorm)
    mean_square = np.mean(np.square(x), axis=-1, keepdims=True)
    normalized = x * (1.0 / np.sqrt(mean_square + F32(eps)))
    return normalized, normalized * g


def _erf_tail(z: np.ndarray, t: np.ndarray, q: np.ndarray, coefficients) -> np.ndarray:
    # z = |argument| -> q = poly(t) * exp(-z^2), t = 1 / (1 + p z): Abramowitz & Stegun
    # 7.1.26, erf(z) = 1 - q with _ERF_A, by Horner's rule in the given buffers (z is
    # overwritten with exp(-z^2))
    np.multiply(z, _ERF_P, out=t)
    t += F32(1.0)
    np.reciprocal(t, out=t)
    a1, a2, a3, a4, a5 = coefficients
    np.multiply(t, a5, out=q)
    for coefficient in (a4, a3, a2, a1):
        q += coefficient
        q *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    q *= z
    return q


def erf(x: np.ndarray) -> np.ndarray:
    # [...] -> [...], float32, in place in three buffers (a new array per step made it the
    # pass's slowest elementwise op when GELU used it)
    a = np.abs(x)
    poly = _erf_tail(a, np.empty_like(a), np.empty_like(a), _ERF_A)
    np.subtract(F32(1.0), poly, out=poly)
    poly[x == 0] = 0.0               # erf(0) = 0 exactly (the approximation leaves ~1e-9)
    return np.copysign(poly, x, out=poly)


def gelu_erf(x: np.ndarray) -> np.ndarray:
    # [...] -> [...]: exact GELU, x * Phi(x) (BERT's "gelu"), with erf(z) = sign(z) * (1 - q),
    # q = poly(t) * exp(-z^2) (A&S 7.1.26, z = x / sqrt 2). For either sign of x that is
    # x * Phi(x) = max(x, 0) - |x| * q / 2: no copysign (numpy's is scalar code), and the
    # halving is folded into the coefficients (exact). ~20 passes, run block by block so they
    # stay in cache (MiniLM [512, 1536], one core: 4.7 ms as whole-array passes, 2.4 ms).
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    size = min(_GELU_BLOCK, flat.size)
    z_block, t_block, q_block = (np.empty(size, out.dtype) for _ in range(3))
    for start in range(0, flat.size, _GELU_BLOCK):
        x_part, o = flat[start:start + _GELU_BLOCK], out[start:start + _GELU_BLOCK]
        z, t, q = z_block[:len(o)], t_block[:len(o)], q_block[:len(o)]
        np.abs(x_part, out=o)                       # |x|
        np.multiply(o, _SQRT_HALF, out=z)           # |z|
        _erf_tail(z, t, q, _HALF_ERF_A)             # q / 2
        q *= o                                      # |x| * q / 2
        np.maximum(x_part, F32(0), out=o)
        o -= q
    return out.reshape(np.shape(x))


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


def silu(x: np.ndarray) -> np.ndarray:
    # x * sigmoid(x) (Llama's SwiGLU gate); exp(-x) overflows to inf for x < -88, giving 0
    out = np.negative(x)
    np.exp(out, out=out)
    out += 1.0
    np.divide(x, out, out=out)
    return out


ACTIVATIONS = {"gelu_erf": gelu_erf, "gelu_tanh": gelu_tanh, "relu": relu, "silu": silu}


def softmax(x: np.ndarray, axis: int = -1, out: np.ndarray | None = None) -> np.ndarray:
    # [..., n] -> [..., n], rows sum to 1; -inf entries become exactly 0. out=x works in place
    # (the same arithmetic, so the same bits, without a second n_head·n² buffer). Rows are
    # done in blocks that stay in cache; a row's arithmetic does not depend on its block.
    # MiniLM's [12, 512, 512] attention scores: 5.0 -> 4.0 ms on one core.
    out = np.empty_like(x) if out is None else out
    if axis not in (-1, x.ndim - 1) or x.size == 0 or not out.flags.c_contiguous:
        shifted = np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
        np.exp(shifted, out=shifted)
        shifted /= shifted.sum(axis=axis, keepdims=True)
        return shifted
    x_rows, out_rows = x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1])
    step = max(1, _SOFTMAX_BLOCK // x.shape[-1])
    for start in range(0, len(x_rows), step):
        _softmax_rows(x_rows[start:start + step], out_rows[start:start + step])
    return out


def softmax_rows_of(x: np.ndarray, first: int, total: int) -> np.ndarray:
    # [m, n] rows first..first+m-1 of a [total, n] stack (one head's scores in a layer's) -> their
    # softmax as softmax(stack) computes them, bit for bit: in the same blocks, a block's rows
    # outside x zeros (a row's sum is a BLAS product whose rounding may depend on its block's
    # size and its place in it, never on the other rows' values)
    m, n = x.shape
    step = max(1, _SOFTMAX_BLOCK // n)
    out = np.empty_like(x)
    for start in range(first // step * step, first + m, step):
        stop = min(start + step, total)
        lo, hi = max(start, first), min(stop, first + m)
        if (lo, hi) == (start, stop):
            _softmax_rows(x[lo - first:hi - first], out[lo - first:hi - first])
            continue
        block = np.zeros((stop - start, n), dtype=x.dtype)
        block[lo - start:hi - start] = x[lo - first:hi - first]
        _softmax_rows(block, block)
        out[lo - first:hi - first] = block[lo - start:hi - start]
    return out


def _softmax_rows(x: np.ndarray, out: np.ndarray) -> None:
    # [rows, n] -> out. The row sums as a product with ones (a BLAS dot, 3x faster than
    # numpy's sum along rows), then one multiply by their reciprocals (faster than a divide)
    shifted = np.subtract(x, x.max(axis=-1, keepdims=True), out=out)
    np.exp(shifted, out=shifted)
    total = shifted @ np.ones((shifted.shape[-1], 1), dtype=shifted.dtype)
    np.reciprocal(total, out=total)
    shifted *= total


def soft_cap(x, cap, out=None):
    # [...] -> cap · tanh(x / cap): squeezed into (-cap, cap), nearly x where |x| << cap
    # (Gemma 2's attention and final logit soft-capping; the order of Hugging Face's ops)
    capped = np.divide(x, F32(cap), out=out)
    np.tanh(capped, out=capped)
    capped *= F32(cap)
    return capped


def causal_mask(n_seq: int) -> np.ndarray:
    # [n_seq, n_seq] bool, True where a query may NOT look (keys after it)
    return np.triu(np.ones((n_seq, n_seq), dtype=bool), k=1)


def additive_mask(blocked: np.ndarray) -> np.ndarray:
    # [n_seq, n_seq] bool -> [n_seq, n_seq] float32: 0 where a query may look, -inf where not
    return np.where(blocked, F32(-np.inf), F32(0))


def blocked_positions(additive: np.ndarray) -> np.ndarray:
    # [n_q, n_k] float32 additive mask -> [n_q, n_k] bool, True where blocked: additive_mask undone
    return np.isneginf(additive)


def windowed_causal_mask(n_seq: int, window: int) -> np.ndarray:
    # [n_seq, n_seq] bool: causal, and also blocked where the key is `window` or more
    # positions back (a query sees `window` keys, itself included)
    index = np.arange(n_seq)
    return causal_mask(n_seq) | (index[:, None] - index[None, :] >= window)


def rope_frequencies(d_head: int, theta: float, scaling: str = "", factor: float = 1.0,
                     low_freq_factor: float = 1.0, high_freq_factor: float = 4.0,
                     original_n_ctx: int = 8192) -> np.ndarray:
    # -> [d_head // 2] float32 radians per position, for pair (i, i + d_head/2).
    # Computed in float32, as Hugging Face does, so angles agree bit for bit far along the text.
    exponents = np.arange(0, d_head, 2, dtype=np.int64).astype(F32) / F32(d_head)
    inv_freq = F32(1.0) / (F32(theta) ** exponents)
    if scaling == "linear":
        inv_freq = inv_freq / F32(factor)
    elif scaling == "llama3":  # Llama 3.1: slow pairs stretched by `factor`, fast ones kept
        low_wavelen = original_n_ctx / low_freq_factor
        high_wavelen = original_n_ctx / high_freq_factor
        wavelen = F32(2 * np.pi) / inv_freq
        scaled = np.where(wavelen > low_wavelen, inv_freq / F32(factor), inv_freq)
        smooth = ((original_n_ctx / wavelen - low_freq_factor)
                  / (high_freq_factor - low_freq_factor)).astype(F32)
        smoothed = (1 - smooth) * scaled / F32(factor) + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        inv_freq = np.where(medium, smoothed, scaled).astype(F32)
    return inv_freq.astype(F32)


def default_rope_frequencies(d_rotary: int, theta) -> np.ndarray:
    # [d_rotary // 2] float32: θ^(-2i/d), the unscaled radians per position of pair i
    exponents = np.arange(0, d_rotary, 2, dtype=np.int64).astype(F32) / F32(d_rotary)
    return (F32(1.0) / (F32(theta) ** exponents)).astype(F32)


def dynamic_rope_frequencies(d_rotary: int, theta: float, factor: float, original_n_ctx: int,
                             n_seq: int) -> np.ndarray:
    # [d_rotary // 2] "dynamic" NTK scaling (transformers' _compute_dynamic_ntk_parameters): up
    # to original_n_ctx tokens the plain frequencies; beyond, the base grows with the length,
    # base · (factor·n/original - (factor - 1))^(d/(d-2)), in float32 as transformers' update is
    if n_seq <= original_n_ctx:
        return default_rope_frequencies(d_rotary, theta)
    grown = (F32(factor) * F32(n_seq) / F32(original_n_ctx)) - F32(factor - 1)
    base = F32(theta) * (grown ** F32(d_rotary / (d_rotary - 2)))
    exponents = np.arange(0, d_rotary, 2, dtype=np.int64).astype(F32) / F32(d_rotary)
    return (F32(1.0) / (base ** exponents)).astype(F32)


def yarn_rope_frequencies(d_rotary: int, theta: float, factor: float, original_n_ctx: int,
                          beta_fast: float = 32.0, beta_slow: float = 1.0,
                          truncate: bool = True) -> np.ndarray:
    # [d_rotary // 2] YaRN (transformers' _compute_yarn_parameters): fast pairs (many turns over
    # the original context) kept, slow ones divided by factor, a linear ramp between
    def correction_dim(rotations: float) -> float:
        return (d_rotary * math.log(original_n_ctx / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d_rotary - 1)
    if low == high:
        high += 0.001                                          # as transformers: no division by 0
    pos_freqs = F32(theta) ** (np.arange(0, d_rotary, 2).astype(F32) / F32(d_rotary))
    extrapolation = F32(1.0) / pos_freqs
    interpolation = F32(1.0) / (F32(factor) * pos_freqs)
    ramp = np.clip((np.arange(d_rotary // 2, dtype=F32) - F32(low)) / F32(high - low), 0, 1)
    kept = F32(1) - ramp.astype(F32)
    return (interpolation * (F32(1) - kept) + extrapolation * kept).astype(F32)


def longrope_frequencies(d_rotary: int, theta: float, factors) -> np.ndarray:
    # [d_rotary // 2] LongRoPE (Phi-3): pair i's plain frequency divided by factors[i] (the
    # short factors up to the original context, the long ones beyond it)
    exponents = np.arange(0, d_rotary, 2, dtype=np.int64).astype(F32) / F32(d_rotary)
    return (F32(1.0) / (np.asarray(factors, dtype=F32) * (F32(theta) ** exponents))).astype(F32)


def rope_angles(n_seq: int, inv_freq: np.ndarray) -> np.ndarray:
    # [n_seq, d_head // 2]: the angle pos · θ_i by which pair i of position pos turns
    return np.arange(n_seq, dtype=F32)[:, None] * inv_freq[None, :]


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    # [n_head, n_seq, d_head], [n_seq, d_rotary // 2] twice -> [n_head, n_seq, d_head]. Pair i is
    # (x[i], x[i + d_rotary/2]) (Hugging Face's rotate_half layout, not interleaved neighbours),
    # turned by its angle: x·cos + rotate_half(x)·sin. Partial rotary (d_rotary < d_head): the
    # dims from d_rotary on pass through untouched.
    half = cos.shape[-1]
    first, second = x[..., :half], x[..., half:2 * half]
    out = np.empty_like(x)
    out[..., :half] = first * cos - second * sin
    out[..., half:2 * half] = second * cos + first * sin
    if 2 * half < x.shape[-1]:
        out[..., 2 * half:] = x[..., 2 * half:]
    return out


def rotate_tail_pairs(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    # [..., n_seq, d], [n_seq, d_rot // 2] twice -> [..., n_seq, d]: the last d_rot dims turned as
    # neighbouring pairs (x[2i], x[2i + 1]) of the tail, each a complex number times cos + i·sin
    # (DeepSeek-V2's decoupled rotary part, transformers' apply_rotary_emb); the dims before the
    # tail pass through untouched
    d_rot = 2 * cos.shape[-1]
    out = x.copy()
    tail = x[..., x.shape[-1] - d_rot:]
    real, imag = tail[..., 0::2], tail[..., 1::2]
    out[..., x.shape[-1] - d_rot::2] = real * cos - imag * sin
    out[..., x.shape[-1] - d_rot + 1::2] = real * sin + imag * cos
    return out


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
