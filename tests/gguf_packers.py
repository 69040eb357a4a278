"""The project's GGUF block packers: float32 weights -> the bytes of llama.cpp's block layouts
(ggml-common.h), for the fixtures (tests/make_gguf_fixtures.py) and the real-size benches.

Each type has an `encode_*` that lays given integer fields (scales, mins, codes) out in the
type's bytes, and a `pack_*` that chooses those fields by simple round-to-nearest (no search
for the best scales, as llama-quantize does; the files are for exactness tests, where only the
layout matters). tests/io/test_gguf_packers.py checks each against gguf.quants.dequantize bit
for bit. Rows: [n_blocks, block_size] float32 in, [n_blocks, type_size] uint8 out."""
from __future__ import annotations

import numpy as np

IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)
MXFP4_LEVELS = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float32)


def _f16(value: np.ndarray) -> np.ndarray:
    """float32 -> the nearest float16, back as float32 (what the block will store)."""
    return np.asarray(value, np.float32).astype(np.float16).astype(np.float32)


def _f16_bytes(value: np.ndarray) -> np.ndarray:
    return np.asarray(value, np.float32).astype(np.float16).reshape(-1, 1).view(np.uint8)


def _safe(x: np.ndarray) -> np.ndarray:
    return np.where(x == 0, np.float32(1), x)


def _extreme(sub: np.ndarray) -> np.ndarray:
    """[..., m] -> [...]: each group's value of largest magnitude, with its sign."""
    return np.take_along_axis(sub, np.abs(sub).argmax(axis=-1)[..., None], axis=-1)[..., 0]


def _nearest(x: np.ndarray, steps: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """[n, g, m] weights, [n, g] scales -> [n, g, m] uint8: the code whose step · level is nearest
    (the first on a tie), in chunks so a big tensor never makes a [*, 16] float array at once."""
    out = np.empty(x.shape, np.uint8)
    for start in range(0, x.shape[0], 4096):
        part, step = x[start:start + 4096], steps[start:start + 4096]
        grid = step[..., None, None] * levels            # [c, g, 1, 16]
        out[start:start + 4096] = np.abs(grid - part[..., None]).argmin(axis=-1)
    return out


def _pairs(q: np.ndarray, half: int) -> np.ndarray:
    """[..., 2 · half] codes < 16 -> [..., half] bytes: code i low nibble, code half + i high."""
    return (q[..., :half] | (q[..., half:] << 4)).astype(np.uint8)


def _crumbs(q: np.ndarray) -> np.ndarray:
    """[n, 2, 4, 32] 2-bit codes -> [n, 64] bytes: byte i of half h holds h·128 + 32 s + i at bits 2 s."""
    q = q.astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)


def _bitplanes(bits: np.ndarray) -> np.ndarray:
    """[n, 8, 32] single bits -> [n, 32] bytes: bit b of byte i is weight 32 b + i."""
    return sum((bits[:, b].astype(np.uint8) << b) for b in range(8)).astype(np.uint8)


def _scales_mins_6bit(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """8 6-bit scales and 8 6-bit mins -> Q4_K/Q5_K's 12 bytes (ggml's get_scale_min_k4 inverted)."""
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    return np.concatenate([sc[:, :4] | ((sc[:, 4:] >> 4) << 6), mn[:, :4] | ((mn[:, 4:] >> 4) << 6),
                           (sc[:, 4:] & 0xF) | ((mn[:, 4:] & 0xF) << 4)], axis=1)


def _asymmetric(sub: np.ndarray, top: int, scale_top: int):
    """Scales and mins for w = d·sc·q − dmin·m with q in [0, top], sc and m in [0, scale_top],
    each rounded to nearest (as pack_q4_k); a weight past the grid's ends takes the end code."""
    lows = np.maximum(-sub.min(axis=2), 0.0)
    scale = (sub.max(axis=2) + lows) / top
    d = _f16(scale.max(axis=1) / scale_top)
    dmin = _f16(lows.max(axis=1) / scale_top)
    sc = np.clip(np.round(scale / _safe(d)[:, None]), 0, scale_top).astype(np.uint8)
    mn = np.clip(np.round(lows / _safe(dmin)[:, None]), 0, scale_top).astype(np.uint8)
    step = (d[:, None] * sc).astype(np.float32)[:, :, None]
    offset = (dmin[:, None] * mn).astype(np.float32)[:, :, None]
    q = np.clip(np.round((sub + offset) / _safe(step)), 0, top).astype(np.uint8)
    return d, dmin, sc, mn, q


# ------------------------------------------------------------------ Q4_K, Q6_K


def pack_q6_k(x: np.ndarray) -> np.ndarray:
    """[n, 256] float32 -> [n, 210] uint8: ql, qh, int8 scales of 16 sub-blocks, fp16 d."""
    n = x.shape[0]
    sub = x.reshape(n, 16, 16)
    sub_scale = np.abs(sub).max(axis=2) / 31.0
    d = (sub_scale.max(axis=1) / 127.0).astype(np.float16).astype(np.float32)
    safe_d = np.where(d == 0, 1.0, d)
    scales = np.clip(np.round(sub_scale / safe_d[:, None]), -128, 127).astype(np.int8)
    step = d[:, None, None] * scales[:, :, None].astype(np.float32)
    q = np.clip(np.round(sub / np.where(step == 0, 1.0, step)) + 32, 0, 63).astype(np.uint8).reshape(n, 256)
    lo, hi = (q & 0xF).reshape(n, 2, 2, 64), (q >> 4).reshape(n, 2, 4, 32)
    ql = (lo[:, :, 0] | (lo[:, :, 1] << 4)).reshape(n, 128)
    qh = (hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)).reshape(n, 64)
    return np.concatenate([ql, qh, scales.view(np.uint8), d.astype(np.float16).reshape(n, 1).view(np.uint8)], axis=1)


def pack_q4_k(x: np.ndarray) -> np.ndarray:
    """[n, 256] float32 -> [n, 144] uint8: fp16 d, fp16 dmin, 12 bytes of 6-bit scales and
    mins of 8 sub-blocks, 128 bytes of 4-bit codes; value = d*sc*q - dmin*m."""
    n = x.shape[0]
    sub = x.reshape(n, 8, 32)
    lows = np.maximum(-sub.min(axis=2), 0.0)
    scale = (sub.max(axis=2) + lows) / 15.0
    d = (scale.max(axis=1) / 63.0).astype(np.float16).astype(np.float32)
    dmin = (lows.max(axis=1) / 63.0).astype(np.float16).astype(np.float32)
    sc = np.clip(np.round(scale / np.where(d == 0, 1, d)[:, None]), 0, 63).astype(np.uint8)
    mn = np.clip(np.round(lows / np.where(dmin == 0, 1, dmin)[:, None]), 0, 63).astype(np.uint8)
    step = (d[:, None] * sc).astype(np.float32)[:, :, None]
    offset = (dmin[:, None] * mn).astype(np.float32)[:, :, None]
    q = np.clip(np.round((sub + offset) / np.where(step == 0, 1, step)), 0, 15).astype(np.uint8)
    q = q.reshape(n, 4, 2, 32)
    qs = (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(n, 128)
    packed = np.concatenate([sc[:, :4] | ((sc[:, 4:] >> 4) << 6), mn[:, :4] | ((mn[:, 4:] >> 4) << 6),
                             (sc[:, 4:] & 0xF) | ((mn[:, 4:] & 0xF) << 4)], axis=1)
    head = np.stack([d, dmin], axis=1).astype(np.float16).view(np.uint8)
    return np.concatenate([head, packed, qs], axis=1)


# ------------------------------------------------------------------ Q5_K


def encode_q5_k(d, dmin, sc, mn, q) -> np.ndarray:
    """d, dmin [n]; sc, mn [n, 8] in [0, 63]; q [n, 256] in [0, 31] -> [n, 176] uint8:
    fp16 d, fp16 dmin, 12 bytes of scales and mins, qh[32] (each weight's fifth bit), qs[128]."""
    n = q.shape[0]
    q = q.astype(np.uint8)
    qh = _bitplanes((q >> 4).reshape(n, 8, 32))
    qs = _pairs((q & 0xF).reshape(n, 4, 64), 32).reshape(n, 128)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), _scales_mins_6bit(sc, mn), qh, qs], axis=1)


def pack_q5_k(x: np.ndarray) -> np.ndarray:
    """[n, 256] float32 -> [n, 176] uint8: w = d·sc[j]·q − dmin·m[j], 8 sub-blocks of 32, q in [0, 31]."""
    d, dmin, sc, mn, q = _asymmetric(x.reshape(-1, 8, 32), 31, 63)
    return encode_q5_k(d, dmin, sc, mn, q.reshape(-1, 256))


# ------------------------------------------------------------------ Q3_K


def encode_q3_k(d, sc, q) -> np.ndarray:
    """d [n]; sc [n, 16] in [0, 63] (meaning sc − 32); q [n, 256] in [0, 7] (meaning q − 4)
    -> [n, 110] uint8: hmask[32] (the codes' high bit), qs[64] (low 2 bits), scales[12], fp16 d."""
    n = q.shape[0]
    q, sc = q.astype(np.uint8), sc.astype(np.uint8)
    hmask = _bitplanes((q >> 2).reshape(n, 8, 32))
    qs = _crumbs((q & 3).reshape(n, 2, 4, 32))
    low = (sc[:, :8] & 0xF) | ((sc[:, 8:] & 0xF) << 4)          # scale j low bits: byte j % 8, nibble j // 8
    high = ((sc >> 4) & 3).reshape(n, 4, 4)                       # scale j high bits: byte 8 + j % 4, bits 2 (j // 4)
    high = high[:, 0] | (high[:, 1] << 2) | (high[:, 2] << 4) | (high[:, 3] << 6)
    return np.concatenate([hmask, qs, low, high, _f16_bytes(d)], axis=1)


def pack_q3_k(x: np.ndarray) -> np.ndarray:
    """[n, 256] float32 -> [n, 110] uint8: w = d·(sc[j] − 32)·(q − 4), 16 sub-blocks of 16; each
    sub-block's largest-magnitude weight lands on q − 4 = −4 (the signed scale takes its sign)."""
    n = x.shape[0]
    sub = x.reshape(n, 16, 16)
    scale = -_extreme(sub) / 4
    d = _f16(np.abs(scale).max(axis=1) / 31)
    sc = np.clip(np.round(scale / _safe(d)[:, None]), -32, 31)
    step = (d[:, None] * sc.astype(np.float32))[:, :, None]
    q = np.where(step == 0, 0, np.clip(np.round(sub / _safe(step)), -4, 3))
    return encode_q3_k(d, (sc + 32).astype(np.uint8), (q + 4).astype(np.uint8).reshape(n, 256))


# ------------------------------------------------------------------ Q2_K


def encode_q2_k(d, dmin, sc, mn, q) -> np.ndarray:
    """d, dmin [n]; sc, mn [n, 16] in [0, 15]; q [n, 256] in [0, 3] -> [n, 84] uint8:
    scales[16] (scale | min << 4), qs[64], fp16 d, fp16 dmin."""
    n = q.shape[0]
    scales = (sc.astype(np.uint8) & 0xF) | (mn.astype(np.uint8) << 4)
    return np.concatenate([scales, _crumbs(q.reshape(n, 2, 4, 32)), _f16_bytes(d), _f16_bytes(dmin)], axis=1)


def pack_q2_k(x: np.ndarray) -> np.ndarray:
    """[n, 256] float32 -> [n, 84] uint8: w = d·sc[j]·q − dmin·m[j], 16 sub-blocks of 16, q in [0, 3]."""
    d, dmin, sc, mn, q = _asymmetric(x.reshape(-1, 16, 16), 3, 15)
    return encode_q2_k(d, dmin, sc, mn, q.reshape(-1, 256))


# ------------------------------------------------------------------ IQ4_XS, IQ4_NL


def encode_iq4_xs(d, sc, q) -> np.ndarray:
    """d [n]; sc [n, 8] in [0, 63] (meaning sc − 32); q [n, 256] in [0, 15] (kvalues[q])
    -> [n, 136] uint8: fp16 d, scales_h (uint16, 2 high bits per scale), scales_l[4], qs[128]."""
    n = q.shape[0]
    sc = sc.astype(np.uint16)
    high = sum(((sc[:, j] >> 4) & 3) << (2 * j) for j in range(8)).astype("<u2").reshape(n, 1).view(np.uint8)
    low = ((sc[:, 0::2] & 0xF) | ((sc[:, 1::2] & 0xF) << 4)).astype(np.uint8)
    qs = _pairs(q.astype(np.uint8).reshape(n, 8, 32), 16).reshape(n, 128)
    return np.concatenate([_f16_bytes(d), high, low, qs], axis=1)


def pack_iq4_xs(x: np.ndarray) -> np.ndarray:
    """[n, 256] float32 -> [n, 136] uint8: w = d·(sc[j] − 32)·kvalues[q], 8 sub-blocks of 32;
    each sub-block's largest-magnitude weight lands on kvalues' −127, the rest on the nearest level."""
    n = x.shape[0]
    sub = x.reshape(n, 8, 32)
    scale = -_extreme(sub) / 127
    d = _f16(np.abs(scale).max(axis=1) / 31)
    sc = np.clip(np.round(scale / _safe(d)[:, None]), -32, 31)
    step = (d[:, None] * sc.astype(np.float32)).astype(np.float32)
    q = _nearest(sub, step, IQ4_LEVELS)
    return encode_iq4_xs(d, (sc + 32).astype(np.uint8), q.reshape(n, 256))


def encode_iq4_nl(d, q) -> np.ndarray:
    """d [n]; q [n, 32] in [0, 15] -> [n, 18] uint8: fp16 d, 16 bytes of nibbles."""
    return np.concatenate([_f16_bytes(d), _pairs(q.astype(np.uint8), 16)], axis=1)


def pack_iq4_nl(x: np.ndarray) -> np.ndarray:
    """[n, 32] float32 -> [n, 18] uint8: w = d·kvalues[q]; the largest-magnitude weight lands on −127."""
    d = _f16(-_extreme(x) / 127)
    return encode_iq4_nl(d, _nearest(x[:, None, :], d[:, None], IQ4_LEVELS)[:, 0])


# ------------------------------------------------------------------ MXFP4


def encode_mxfp4(e, q) -> np.ndarray:
    """e [n] the 8-bit exponents (scale 2^(e − 128) with ggml's doubled levels); q [n, 32] in
    [0, 15] FP4 e2m1 codes -> [n, 17] uint8."""
    return np.concatenate([np.asarray(e, np.uint8).reshape(-1, 1), _pairs(q.astype(np.uint8), 16)], axis=1)


def mxfp4_scale(e: np.ndarray) -> np.ndarray:
    """2^(e − 128) as float32 (ggml_e8m0_to_fp32_half)."""
    return np.ldexp(np.float32(1), np.asarray(e, np.int32) - 128).astype(np.float32)


def pack_mxfp4(x: np.ndarray) -> np.ndarray:
    """[n, 32] float32 -> [n, 17] uint8, as gguf-py's MXFP4 quantizer chooses: e = ⌊log2 max|x|⌋
    − 2 + 127 (so the largest weight is near the top levels ±8, ±12), each weight on the nearest level."""
    amax = np.abs(x).max(axis=1)
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(amax)) - 2 + 127, 0).astype(np.uint8)
    return encode_mxfp4(e, _nearest(x[:, None, :], mxfp4_scale(e)[:, None], MXFP4_LEVELS)[:, 0])


PACKERS = {"Q4_K": pack_q4_k, "Q6_K": pack_q6_k, "Q5_K": pack_q5_k, "Q3_K": pack_q3_k, "Q2_K": pack_q2_k,
           "IQ4_XS": pack_iq4_xs, "IQ4_NL": pack_iq4_nl, "MXFP4": pack_mxfp4}


def pack(w: np.ndarray, quant_type: str) -> np.ndarray:
    """[rows, cols] float32 -> [rows, cols / block_size · type_size] uint8 of `quant_type`."""
    import gguf
    block_size, _ = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[quant_type]]
    if w.shape[-1] % block_size:
        raise ValueError(f"{quant_type} needs rows of a multiple of {block_size} weights, got {w.shape[-1]}")
    blocks = PACKERS[quant_type](np.asarray(w, np.float32).reshape(-1, block_size))
    return blocks.reshape(*w.shape[:-1], -1)
