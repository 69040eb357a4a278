"""Compiled kernels for weights kept in their stored blocks (GGUF quant types, float16): a
block's dequantization, and the products x @ W.T straight from the blocks, never holding W
whole in float32.

Each decoder is llama.cpp's formula as gguf-py's numpy dequantize_blocks writes it, in the
same float32 operations in the same order, so a decoded block equals gguf.quants.dequantize
bit for bit (tests/core/test_kernels.py checks every type). The products regroup the sums
(a float32 dot product of each decoded block with the rows of x, the blocks' partial sums
added in order), as any BLAS does: they equal the float32 product of the dequantized matrix
within float32 rounding of a sum of d_in terms.

Written as plain loops so that numba compiles them (core/model/quantized.py calls them and keeps
the numpy path as the reference and the fallback where numba is not installed). A new type
is one more decoder here and one more entry in KINDS and _decode's dispatch."""
from __future__ import annotations

import numpy as np

try:
    import numba
    HAVE_NUMBA = True
except ImportError:            # the numpy path in core/model/quantized.py does the work
    numba = None
    HAVE_NUMBA = False

F32 = np.float32

# name -> (kind number in _decode, weights a block, bytes a block)
KINDS = {"Q4_0": (0, 32, 18), "Q4_1": (1, 32, 20), "Q5_0": (2, 32, 22), "Q5_1": (3, 32, 24),
         "Q8_0": (4, 32, 34), "Q4_K": (5, 256, 144), "Q5_K": (6, 256, 176), "Q6_K": (7, 256, 210),
         "F16": (8, 32, 64)}
GROUP = 256                    # weights decoded at a time before the dot products


def half_table() -> np.ndarray:
    """[65536] float32: the value of every float16 bit pattern (the blocks' scales)."""
    return np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(F32)


def _jit(**options):
    def wrap(function):
        if numba is None:
            return function
        return numba.njit(cache=True, nogil=True, **options)(function)
    return wrap


# ------------------------------------------------------------------ decoders: one block each
# blk: the block's bytes; dst: its weights (float32) <- the values gguf-py's formula gives

@_jit(inline="always")
def _half(blk, at, half):
    return half[np.int32(blk[at]) | (np.int32(blk[at + 1]) << 8)]


@_jit()
def _q4_0(blk, dst, half):
    d, qs = _half(blk, 0, half), blk[2:18]
    for i in range(16):
        dst[i] = d * F32(np.int32(qs[i] & np.uint8(15)) - 8)
        dst[16 + i] = d * F32(np.int32(qs[i] >> np.uint8(4)) - 8)


@_jit()
def _q4_1(blk, dst, half):
    d, m, qs = _half(blk, 0, half), _half(blk, 2, half), blk[4:20]
    for i in range(16):
        dst[i] = d * F32(qs[i] & np.uint8(15)) + m
        dst[16 + i] = d * F32(qs[i] >> np.uint8(4)) + m


@_jit(inline="always")
def _fifth_bits(blk, at):
    return (np.uint32(blk[at]) | (np.uint32(blk[at + 1]) << 8) | (np.uint32(blk[at + 2]) << 16)
            | (np.uint32(blk[at + 3]) << 24))


@_jit()
def _q5_0(blk, dst, half):
    d, qh, qs = _half(blk, 0, half), _fifth_bits(blk, 2), blk[6:22]
    for i in range(16):
        low = np.int32(qs[i] & np.uint8(15)) | (np.int32((qh >> i) & 1) << 4)
        high = np.int32(qs[i] >> np.uint8(4)) | (np.int32((qh >> (i + 16)) & 1) << 4)
        dst[i] = d * F32(low - 16)
        dst[16 + i] = d * F32(high - 16)


@_jit()
def _q5_1(blk, dst, half):
    d, m, qh, qs = _half(blk, 0, half), _half(blk, 2, half), _fifth_bits(blk, 4), blk[8:24]
    for i in range(16):
        low = np.int32(qs[i] & np.uint8(15)) | (np.int32((qh >> i) & 1) << 4)
        high = np.int32(qs[i] >> np.uint8(4)) | (np.int32((qh >> (i + 16)) & 1) << 4)
        dst[i] = d * F32(low) + m
        dst[16 + i] = d * F32(high) + m


@_jit()
def _q8_0(blk, dst, half):
    d, qs = _half(blk, 0, half), blk[2:34].view(np.int8)
    for i in range(32):
        dst[i] = F32(qs[i]) * d


@_jit(inline="always")
def _scale_min(s, j):
    # Q4_K / Q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes s
    if j < 4:
        return np.int32(s[j] & np.uint8(63)), np.int32(s[4 + j] & np.uint8(63))
    return (np.int32(s[4 + j] & np.uint8(15)) | np.int32((s[j - 4] >> np.uint8(2)) & np.uint8(48)),
            np.int32(s[4 + j] >> np.uint8(4)) | np.int32((s[j] >> np.uint8(2)) & np.uint8(48)))


@_jit(inline="always")
def _nibbles(byte):
    # (byte & 15, byte >> 4) as float32, computed in float32 lanes: numba widens integer
    # operations to 64 bits, which halves the vector width (the values are the same integers)
    code = F32(byte)
    high = np.floor(code * F32(0.0625))
    return code - high * F32(16.0), high


@_jit(inline="always")
def _crumbs(byte):
    # the four 2-bit fields of a byte (bits 0-1, 2-3, 4-5, 6-7) as float32, in float32 lanes
    # (as _nibbles; every step is exact on 0..255)
    code = F32(byte)
    above2 = np.floor(code * F32(0.25))
    above4 = np.floor(code * F32(0.0625))
    above6 = np.floor(code * F32(0.015625))
    return code - above2 * F32(4.0), above2 - above4 * F32(4.0), above4 - above6 * F32(4.0), above6


@_jit(inline="always")
def _lowest_bit(halved):
    # bit k of a byte from halved = floor(byte / 2**k) (float32): exact on 0..255
    return halved - np.floor(halved * F32(0.5)) * F32(2.0)


@_jit()
def _q4_k(blk, dst, half):
    d, dmin, s, qs = _half(blk, 0, half), _half(blk, 2, half), blk[4:16], blk[16:144]
    for p in range(4):                              # sub-blocks 2p, 2p + 1 share 32 bytes
        sc0, m0 = _scale_min(s, 2 * p)
        sc1, m1 = _scale_min(s, 2 * p + 1)
        step0, low0, step1, low1 = d * F32(sc0), dmin * F32(m0), d * F32(sc1), dmin * F32(m1)
        q, a, b = qs[32 * p:32 * p + 32], dst[64 * p:64 * p + 32], dst[64 * p + 32:64 * p + 64]
        for i in range(32):
            low, high = _nibbles(q[i])
            a[i] = step0 * low - low0
            b[i] = step1 * high - low1


@_jit()
def _q5_k(blk, dst, half):
    d, dmin, s, qh, qs = _half(blk, 0, half), _half(blk, 2, half), blk[4:16], blk[16:48], blk[48:176]
    for p in range(4):
        sc0, m0 = _scale_min(s, 2 * p)
        sc1, m1 = _scale_min(s, 2 * p + 1)
        step0, low0, step1, low1 = d * F32(sc0), dmin * F32(m0), d * F32(sc1), dmin * F32(m1)
        q, a, b = qs[32 * p:32 * p + 32], dst[64 * p:64 * p + 32], dst[64 * p + 32:64 * p + 64]
        shift0, shift1 = np.uint8(2 * p), np.uint8(2 * p + 1)
        for i in range(32):
            fifth0 = ((qh[i] >> shift0) & np.uint8(1)) << np.uint8(4)
            fifth1 = ((qh[i] >> shift1) & np.uint8(1)) << np.uint8(4)
            a[i] = step0 * F32((q[i] & np.uint8(15)) | fifth0) - low0
            b[i] = step1 * F32((q[i] >> np.uint8(4)) | fifth1) - low1


@_jit()
def _q6_k(blk, dst, half):
    d = _half(blk, 208, half)
    for h in range(2):                              # two halves of 128 weights
        ql, qh, sc, out = blk[64 * h:64 * h + 64], blk[128 + 32 * h:160 + 32 * h], blk[192 + 8 * h:200 + 8 * h], dst[128 * h:128 * h + 128]
        for t in range(4):                          # 32 weights: ql nibble t // 2 of bytes, qh bits 2t
            step0 = d * F32(np.int8(sc[2 * t]))
            step1 = d * F32(np.int8(sc[2 * t + 1]))
            lows = ql[32 * (t % 2):32 * (t % 2) + 32]
            shift, high_shift = np.uint8(4 * (t // 2)), np.uint8(2 * t)
            for i in range(32):
                q = np.int32(((lows[i] >> shift) & np.uint8(15)) | (((qh[i] >> high_shift) & np.uint8(3)) << np.uint8(4))) - 32
                out[32 * t + i] = (step0 if i < 16 else step1) * F32(q)


@_jit()
def _f16(blk, dst, half):
    for i in range(32):
        dst[i] = half[np.int32(blk[2 * i]) | (np.int32(blk[2 * i + 1]) << 8)]


@_jit(inline="always")
def _decode(kind, row, block, dst, half):
    # block `block` of the stored row -> dst (its weights)
    if kind == 5:
        _q4_k(row[block * 144:block * 144 + 144], dst, half)
    elif kind == 7:
        _q6_k(row[block * 210:block * 210 + 210], dst, half)
    elif kind == 4:
        _q8_0(row[block * 34:block * 34 + 34], dst, half)
    elif kind == 6:
        _q5_k(row[block * 176:block * 176 + 176], dst, half)
    elif kind == 8:
        _f16(row[block * 64:block * 64 + 64], dst, half)
    elif kind == 0:
        _q4_0(row[block * 18:block * 18 + 18], dst, half)
    elif kind == 1:
        _q4_1(row[block * 20:block * 20 + 20], dst, half)
    elif kind == 2:
        _q5_0(row[block * 22:block * 22 + 22], dst, half)
    elif kind == 3:
        _q5_1(row[block * 24:block * 24 + 24], dst, half)


# ------------------------------------------------------------------ a stored row times x
# acc[i] += x[i] . (the row's dequantized weights), for every row i of x: each weight is
# computed by its decoder's formula (same operations, no fused multiply-add), its products with
# x summed in vector lanes (reassoc). The types of the common files get a fused loop; the
# others decode GROUP weights into buf and take _dot.

_FAST = {"reassoc", "nsz"}


@_jit(fastmath=_FAST)
def _q4_k_row(row, x, acc, half):
    for b in range(x.shape[1] // 256):
        at, base = b * 144, b * 256
        d = half[np.int32(row[at]) | (np.int32(row[at + 1]) << 8)]
        dmin = half[np.int32(row[at + 2]) | (np.int32(row[at + 3]) << 8)]
        s = row[at + 4:at + 16]
        for p in range(4):
            sc0, m0 = _scale_min(s, 2 * p)
            sc1, m1 = _scale_min(s, 2 * p + 1)
            step0, low0, step1, low1 = d * F32(sc0), dmin * F32(m0), d * F32(sc1), dmin * F32(m1)
            codes, first = at + 16 + 32 * p, base + 64 * p
            for r in range(x.shape[0]):
                total = F32(0.0)
                for i in range(32):
                    low, high = _nibbles(row[codes + i])
                    total += (step0 * low - low0) * x[r, first + i]
                    total += (step1 * high - low1) * x[r, first + 32 + i]
                acc[r] += total


@_jit(fastmath=_FAST)
def _q5_k_row(row, x, acc, half):
    for b in range(x.shape[1] // 256):
        at, base = b * 176, b * 256
        d = half[np.int32(row[at]) | (np.int32(row[at + 1]) << 8)]
        dmin = half[np.int32(row[at + 2]) | (np.int32(row[at + 3]) << 8)]
        s = row[at + 4:at + 16]
        for p in range(4):
            sc0, m0 = _scale_min(s, 2 * p)
            sc1, m1 = _scale_min(s, 2 * p + 1)
            step0, low0, step1, low1 = d * F32(sc0), dmin * F32(m0), d * F32(sc1), dmin * F32(m1)
            codes, first = at + 48 + 32 * p, base + 64 * p
            below = F32(1.0 / (1 << (2 * p)))               # 2**-2p, exact
            for r in range(x.shape[0]):
                total = F32(0.0)
                for i in range(32):                         # codes in float32 lanes, as _q5_k_rows
                    low, high = _nibbles(row[codes + i])
                    halved = np.floor(F32(row[at + 16 + i]) * below)
                    fifth0 = _lowest_bit(halved)
                    fifth1 = _lowest_bit(np.floor(halved * F32(0.5)))
                    total += (step0 * (low + fifth0 * F32(16.0)) - low0) * x[r, first + i]
                    total += (step1 * (high + fifth1 * F32(16.0)) - low1) * x[r, first + 32 + i]
                acc[r] += total


@_jit(fastmath=_FAST)
def _q6_k_row(row, x, acc, half):
    for b in range(x.shape[1] // 256):
        at = b * 210
        d = half[np.int32(row[at + 208]) | (np.int32(row[at + 209]) << 8)]
        for h in range(2):
            lows, highs, scales = at + 64 * h, at + 128 + 32 * h, at + 192 + 8 * h
            first = b * 256 + 128 * h
            for part in range(2):                           # as _q6_k_rows: weights i < 16, then the rest
                step0 = d * F32(np.int8(row[scales + part]))
                step1 = d * F32(np.int8(row[scales + 2 + part]))
                step2 = d * F32(np.int8(row[scales + 4 + part]))
                step3 = d * F32(np.int8(row[scales + 6 + part]))
                for r in range(x.shape[0]):
                    total = F32(0.0)
                    for i in range(16 * part, 16 * part + 16):
                        low0, high0 = _nibbles(row[lows + i])
                        low1, high1 = _nibbles(row[lows + 32 + i])
                        c0, c1, c2, c3 = _crumbs(row[highs + i])
                        total += (step0 * (low0 + c0 * F32(16.0) - F32(32.0))) * x[r, first + i]
                        total += (step1 * (low1 + c1 * F32(16.0) - F32(32.0))) * x[r, first + 32 + i]
                        total += (step2 * (high0 + c2 * F32(16.0) - F32(32.0))) * x[r, first + 64 + i]
                        total += (step3 * (high1 + c3 * F32(16.0) - F32(32.0))) * x[r, first + 96 + i]
                    acc[r] += total


@_jit(fastmath=_FAST)
def _q8_0_row(row, x, acc, half):
    for b in range(x.shape[1] // 32):
        at, base = b * 34, b * 32
        d = half[np.int32(row[at]) | (np.int32(row[at + 1]) << 8)]
        for r in range(x.shape[0]):
            total = F32(0.0)
            for i in range(32):
                q = np.int32(row[at + 2 + i])
                total += (F32(q - ((q >> 7) << 8)) * d) * x[r, base + i]     # the int8 code
            acc[r] += total


@_jit(fastmath=_FAST)
def _dot(a, b, n):
    # float32 sum of a[:n] * b[:n], regrouped into vector lanes
    total = F32(0.0)
    for i in range(n):
        total += a[i] * b[i]
    return total


@_jit()
def _decoded_row(kind, block_size, row, x, acc, half, buf):
    # any type: GROUP weights decoded into buf (stays in L1), multiplied by every row of x
    per_group = buf.shape[0] // block_size
    n_blocks = x.shape[1] // block_size
    for first in range(0, n_blocks, per_group):
        last = min(first + per_group, n_blocks)
        for b in range(first, last):
            _decode(kind, row, b, buf[(b - first) * block_size:(b - first + 1) * block_size], half)
        base, length = first * block_size, (last - first) * block_size
        for r in range(x.shape[0]):
            acc[r] += _dot(buf, x[r, base:base + length], length)


@_jit()
def _row_times(kind, block_size, row, x, acc, half, buf):
    if kind == 5:
        _q4_k_row(row, x, acc, half)
    elif kind == 7:
        _q6_k_row(row, x, acc, half)
    elif kind == 6:
        _q5_k_row(row, x, acc, half)
    elif kind == 4:
        _q8_0_row(row, x, acc, half)
    else:
        _decoded_row(kind, block_size, row, x, acc, half, buf)


# ------------------------------------------------------------------ whole rows, products


@_jit()
def _q4_k_rows(codes, out, half):
    # _q4_k over whole rows, indexed directly (a block's slices cost as much as its decoding)
    for r in range(codes.shape[0]):
        for b in range(out.shape[1] // 256):
            at, base = b * 144, b * 256
            d = half[np.int32(codes[r, at]) | (np.int32(codes[r, at + 1]) << 8)]
            dmin = half[np.int32(codes[r, at + 2]) | (np.int32(codes[r, at + 3]) << 8)]
            s = codes[r, at + 4:at + 16]
            for p in range(4):
                sc0, m0 = _scale_min(s, 2 * p)
                sc1, m1 = _scale_min(s, 2 * p + 1)
                step0, low0, step1, low1 = d * F32(sc0), dmin * F32(m0), d * F32(sc1), dmin * F32(m1)
                at_codes, first = at + 16 + 32 * p, base + 64 * p
                for i in range(32):
                    low, high = _nibbles(codes[r, at_codes + i])
                    out[r, first + i] = step0 * low - low0
                    out[r, first + 32 + i] = step1 * high - low1


@_jit()
def _q8_0_rows(codes, out, half):
    # _q8_0 over whole rows, indexed directly
    for r in range(codes.shape[0]):
        signed = codes[r].view(np.int8)
        for b in range(out.shape[1] // 32):
            at, base = b * 34, b * 32
            d = half[np.int32(codes[r, at]) | (np.int32(codes[r, at + 1]) << 8)]
            for i in range(32):
                out[r, base + i] = F32(signed[at + 2 + i]) * d


@_jit()
def _q6_k_rows(codes, out, half):
    # _q6_k over whole rows, indexed directly: each half of a block is 64 bytes of low nibbles
    # (ql), 32 of 2-bit high parts (qh) and 8 int8 scales of 16 weights; weight 32t + i of the
    # half is (ql[32(t % 2) + i] >> 4(t // 2)) & 15 | ((qh[i] >> 2t) & 3) << 4, minus 32. The
    # codes are taken in float32 lanes (exact integers, so d * sc * q is gguf's product)
    for r in range(codes.shape[0]):
        for b in range(out.shape[1] // 256):
            at = b * 210
            d = half[np.int32(codes[r, at + 208]) | (np.int32(codes[r, at + 209]) << 8)]
            for h in range(2):
                lows, highs, scales = at + 64 * h, at + 128 + 32 * h, at + 192 + 8 * h
                first = b * 256 + 128 * h
                for part in range(2):                   # weights i of 0..15, then 16..31
                    step0 = d * F32(np.int8(codes[r, scales + part]))
                    step1 = d * F32(np.int8(codes[r, scales + 2 + part]))
                    step2 = d * F32(np.int8(codes[r, scales + 4 + part]))
                    step3 = d * F32(np.int8(codes[r, scales + 6 + part]))
                    for i in range(16 * part, 16 * part + 16):
                        low0, high0 = _nibbles(codes[r, lows + i])
                        low1, high1 = _nibbles(codes[r, lows + 32 + i])
                        c0, c1, c2, c3 = _crumbs(codes[r, highs + i])
                        out[r, first + i] = step0 * (low0 + c0 * F32(16.0) - F32(32.0))
                        out[r, first + 32 + i] = step1 * (low1 + c1 * F32(16.0) - F32(32.0))
                        out[r, first + 64 + i] = step2 * (high0 + c2 * F32(16.0) - F32(32.0))
                        out[r, first + 96 + i] = step3 * (high1 + c3 * F32(16.0) - F32(32.0))


@_jit()
def _q5_k_rows(codes, out, half):
    # _q5_k over whole rows, indexed directly: sub-blocks 2p, 2p + 1 take the low and high
    # nibbles of 32 bytes and bits 2p, 2p + 1 of qh[i] as their fifth bit; in float32 lanes
    for r in range(codes.shape[0]):
        for b in range(out.shape[1] // 256):
            at, base = b * 176, b * 256
            d = half[np.int32(codes[r, at]) | (np.int32(codes[r, at + 1]) << 8)]
            dmin = half[np.int32(codes[r, at + 2]) | (np.int32(codes[r, at + 3]) << 8)]
            s = codes[r, at + 4:at + 16]
            for p in range(4):
                sc0, m0 = _scale_min(s, 2 * p)
                sc1, m1 = _scale_min(s, 2 * p + 1)
                step0, low0, step1, low1 = d * F32(sc0), dmin * F32(m0), d * F32(sc1), dmin * F32(m1)
                at_codes, first = at + 48 + 32 * p, base + 64 * p
                below0 = F32(1.0 / (1 << (2 * p)))          # 2**-2p, exact
                for i in range(32):
                    low, high = _nibbles(codes[r, at_codes + i])
                    halved = np.floor(F32(codes[r, at + 16 + i]) * below0)
                    fifth0 = _lowest_bit(halved)
                    fifth1 = _lowest_bit(np.floor(halved * F32(0.5)))
                    out[r, first + i] = step0 * (low + fifth0 * F32(16.0)) - low0
                    out[r, first + 32 + i] = step1 * (high + fifth1 * F32(16.0)) - low1


@_jit()
def dequantize_rows(kind, block_size, codes, out, half):
    """codes [n_rows, bytes] -> out [n_rows, d_in] float32 (a tile of the matrix)."""
    if kind == 5:
        _q4_k_rows(codes, out, half)
        return
    if kind == 4:
        _q8_0_rows(codes, out, half)
        return
    if kind == 7:
        _q6_k_rows(codes, out, half)
        return
    if kind == 6:
        _q5_k_rows(codes, out, half)
        return
    n_blocks = out.shape[1] // block_size
    for r in range(codes.shape[0]):
        row, values = codes[r], out[r]
        for b in range(n_blocks):
            _decode(kind, row, b, values[b * block_size:(b + 1) * block_size], half)


@_jit()
def _rows_times(kind, block_size, codes, x, out, half, buf, acc):
    # out[:, r] <- x @ row r of W, for the stored rows `codes`
    for r in range(codes.shape[0]):
        acc[:] = 0
        _row_times(kind, block_size, codes[r], x, acc, half, buf)
        for i in range(x.shape[0]):
            out[i, r] = acc[i]


@_jit()
def few_rows_product(kind, block_size, codes, x, out, half):
    """out [n, n_out] <- x [n, d_in] @ W.T for W [n_out, d_in] stored as `codes`, straight
    from the blocks (a keystroke, a generation step: few rows of x). One thread's share:
    core/model/quantized.py splits the stored rows between threads (the GIL is released)."""
    buf = np.empty(max(GROUP, block_size), dtype=np.float32)
    acc = np.empty(x.shape[0], dtype=np.float32)
    _rows_times(kind, block_size, codes, x, out, half, buf, acc)


@_jit(fastmath=_FAST)
def _dot4(w0, w1, w2, w3, x, n):
    # four float32 sums x . w_k, in vector lanes: x read once for the four rows
    a0, a1, a2, a3 = F32(0.0), F32(0.0), F32(0.0), F32(0.0)
    for i in range(n):
        v = x[i]
        a0 += w0[i] * v
        a1 += w1[i] * v
        a2 += w2[i] * v
        a3 += w3[i] * v
    return a0, a1, a2, a3


@_jit()
def some_rows_product(kind, block_size, codes, x, out, half):
    """out [n, n_out] <- x [n, d_in] @ W.T for a handful of rows of x (an edit near the end):
    4 stored rows at a time decoded into a buffer that stays in L2, each multiplied by every
    row of x (a tile and BLAS cost more below ~8 rows; few_rows_product decodes again for each
    row of x). One thread's share, as few_rows_product."""
    n = x.shape[1]
    buf = np.empty((4, n), dtype=np.float32)
    for j in range(0, codes.shape[0], 4):
        k = min(4, codes.shape[0] - j)
        dequantize_rows(kind, block_size, codes[j:j + k], buf[:k], half)
        buf[k:] = 0                 # the last rows: the same sums, whichever place a row takes
        for r in range(x.shape[0]):
            sums = _dot4(buf[0], buf[1], buf[2], buf[3], x[r], n)
            for i in range(k):
                out[r, j + i] = sums[i]
