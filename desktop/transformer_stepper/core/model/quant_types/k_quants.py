"""The 256-weight super-block types (ggml-common.h, "K-quants"): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
and IQ4_XS (IQ4_NL's grid with K-style 6-bit sub-block scales). A float16 super-scale d (and
super-min dmin) times small integer scales (and mins) per sub-block."""
from __future__ import annotations

import numpy as np

from .base import QuantType, f16, nibbles
from .small_blocks import IQ4_LEVELS


def _bits(raw: np.ndarray, shifts, mask: int) -> np.ndarray:
    """[n, m] uint8 -> [n, len(shifts), m]: (raw >> s) & mask for each shift s."""
    return np.stack([(raw >> s) & mask for s in shifts], axis=1)


def scales_and_mins_6bit(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K/Q5_K's 12 bytes -> 8 6-bit scales and 8 6-bit mins (ggml's get_scale_min_k4):
    bytes 0-3 hold scales 0-3 (and the top 2 bits of scales 4-7), 4-7 the mins likewise,
    8-11 the low 4 bits of scales 4-7 (low nibble) and mins 4-7 (high nibble)."""
    d, m, md = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    sc = np.concatenate([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], axis=1)
    mn = np.concatenate([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], axis=1)
    return sc.astype(np.int32), mn.astype(np.int32)


def _with_mins(d, dmin, sc, mn, codes) -> dict:
    return dict(codes=codes, d=d, dmin=dmin, sub_scales=sc, sub_mins=mn,
                scales=d.reshape(-1, 1) * sc.astype(np.float32), mins=dmin.reshape(-1, 1) * mn.astype(np.float32))


class Q2_K(QuantType, name="Q2_K"):
    """scales[16] (4-bit scale | 4-bit min << 4), qs[64] 2-bit codes, fp16 d, fp16 dmin."""
    block_size, type_size, sub_block_size, code_range = 256, 84, 16, (0, 3)
    formula = ("w[i] = d · sc[j] · q[i] − dmin · m[j]  (256 weights in 16 sub-blocks j of 16; q in [0, 3]; "
               "sc, m 4-bit; d, dmin float16)")
    scale_text = "d·sc[j]"
    d_label = "d (float16 super-scale)"
    has_mins = True

    @classmethod
    def decode_fields(cls, blocks):
        n = blocks.shape[0]
        packed, qs = blocks[:, 0:16], blocks[:, 16:80]
        d, dmin = f16(blocks[:, 80:82]), f16(blocks[:, 82:84])
        # byte i of each 32-byte half holds weights i, 32 + i, 64 + i, 96 + i of that half
        codes = _bits(qs.reshape(n * 2, 32), (0, 2, 4, 6), 0x03).reshape(n, 256).astype(np.int32)
        return _with_mins(d, dmin, (packed & 0x0F).astype(np.int32), (packed >> 4).astype(np.int32), codes)


class Q3_K(QuantType, name="Q3_K"):
    """hmask[32] (each weight's high bit), qs[64] (low 2 bits), scales[12] (16 6-bit), fp16 d."""
    block_size, type_size, sub_block_size, code_range = 256, 110, 16, (0, 7)
    formula = ("w[i] = d · (sc[j] − 32) · (q[i] − 4)  (256 weights in 16 sub-blocks j of 16; q in [0, 7] "
               "= low 2 bits | high bit << 2; sc 6-bit; d float16)")
    level_text = "(q − 4)"
    scale_text = "d·(sc[j] − 32)"
    sc_offset = 32
    d_label = "d (float16 super-scale)"

    @classmethod
    def decode_fields(cls, blocks):
        n = blocks.shape[0]
        hmask, qs, packed, d = blocks[:, 0:32], blocks[:, 32:96], blocks[:, 96:108], f16(blocks[:, 108:110])
        low = _bits(qs.reshape(n * 2, 32), (0, 2, 4, 6), 0x03).reshape(n, 256)
        high = _bits(hmask, range(8), 0x01).reshape(n, 256)      # bit b of byte i: weight 32 b + i
        codes = (low | (high << 2)).astype(np.int32)
        # scales: low 4 bits from bytes 0-7 (low nibbles are scales 0-7, high nibbles 8-15),
        # high 2 bits from bytes 8-11 (scale j in byte 8 + j % 4 at bit 2 (j // 4))
        lo = np.concatenate([packed[:, 0:8] & 0x0F, packed[:, 0:8] >> 4], axis=1)
        hi = _bits(packed[:, 8:12], (0, 2, 4, 6), 0x03).reshape(n, 16)
        sc = (lo | (hi << 4)).astype(np.int32)
        return dict(codes=codes, d=d, sub_scales=sc, scales=d.reshape(-1, 1) * (sc - 32).astype(np.float32))

    @classmethod
    def levels(cls, codes):
        return (codes - 4).astype(np.float32)


class Q4_K(QuantType, name="Q4_K"):
    """fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles."""
    block_size, type_size, sub_block_size, code_range = 256, 144, 32, (0, 15)
    formula = ("w[i] = d · sc[j] · q[i] − dmin · m[j]  (256 weights in 8 sub-blocks j of 32; q in [0, 15]; "
               "sc, m 6-bit; d, dmin float16)")
    scale_text = "d·sc[j]"
    d_label = "d (float16 super-scale)"
    has_mins = True

    @classmethod
    def decode_fields(cls, blocks):
        n = blocks.shape[0]
        d, dmin = f16(blocks[:, 0:2]), f16(blocks[:, 2:4])
        sc, mn = scales_and_mins_6bit(blocks[:, 4:16])
        # 32-byte chunk c: low nibbles are sub-block 2c, high nibbles sub-block 2c + 1
        codes = nibbles(blocks[:, 16:144].reshape(n * 4, 32)).reshape(n, 256).astype(np.int32)
        return _with_mins(d, dmin, sc, mn, codes)


class Q5_K(QuantType, name="Q5_K"):
    """Q4_K's layout plus qh[32]: the fifth bit of every weight."""
    block_size, type_size, sub_block_size, code_range = 256, 176, 32, (0, 31)
    formula = ("w[i] = d · sc[j] · q[i] − dmin · m[j]  (256 weights in 8 sub-blocks j of 32; q in [0, 31] "
               "= 4-bit nibble | high bit << 4; sc, m 6-bit; d, dmin float16)")
    scale_text = "d·sc[j]"
    d_label = "d (float16 super-scale)"
    has_mins = True

    @classmethod
    def decode_fields(cls, blocks):
        n = blocks.shape[0]
        d, dmin = f16(blocks[:, 0:2]), f16(blocks[:, 2:4])
        sc, mn = scales_and_mins_6bit(blocks[:, 4:16])
        qh, qs = blocks[:, 16:48], blocks[:, 48:176]
        low = nibbles(qs.reshape(n * 4, 32)).reshape(n, 256)
        high = _bits(qh, range(8), 0x01).reshape(n, 256)        # bit b of byte i: weight 32 b + i
        return _with_mins(d, dmin, sc, mn, (low | (high << 4)).astype(np.int32))


class Q6_K(QuantType, name="Q6_K"):
    """ql[128] low nibbles, qh[64] high 2 bits, 16 int8 scales, fp16 d."""
    block_size, type_size, sub_block_size, code_range = 256, 210, 16, (0, 63)
    formula = ("w[i] = d · sc[j] · (q[i] − 32)  (256 weights in 16 sub-blocks j of 16; q in [0, 63]; "
               "sc int8; d float16)")
    level_text = "(q − 32)"
    scale_text = "d·sc[j]"
    d_label = "d (float16 super-scale)"

    @classmethod
    def decode_fields(cls, blocks):
        n = blocks.shape[0]
        ql, qh = blocks[:, 0:128].reshape(n * 2, 64), blocks[:, 128:192].reshape(n * 2, 32)
        sc = blocks[:, 192:208].view(np.int8).astype(np.int32)
        d = f16(blocks[:, 208:210])
        low = nibbles(ql).reshape(n, 256)                       # half h: 64 low, then 64 high nibbles
        high = _bits(qh, (0, 2, 4, 6), 0x03).reshape(n, 256)    # half h: weight 32 s + i at bits 2 s
        codes = (low | (high << 4)).astype(np.int32)
        return dict(codes=codes, d=d, sub_scales=sc, scales=d.reshape(-1, 1) * sc.astype(np.float32))

    @classmethod
    def levels(cls, codes):
        return (codes - 32).astype(np.float32)


class IQ4_XS(QuantType, name="IQ4_XS"):
    """fp16 d, scales_h (uint16: high 2 bits of 8 scales), scales_l[4] (low nibbles), qs[128]
    nibbles indexing IQ4_NL's non-linear grid."""
    block_size, type_size, sub_block_size, code_range = 256, 136, 32, (0, 15)
    formula = ("w[i] = d · (sc[j] − 32) · kvalues[q[i]]  (256 weights in 8 sub-blocks j of 32; q in [0, 15] "
               f"picks one of 16 non-linear levels kvalues = {list(IQ4_LEVELS)}; sc 6-bit; d float16)")
    level_text = "kvalues[q]"
    scale_text = "d·(sc[j] − 32)"
    sc_offset = 32
    d_label = "d (float16 super-scale)"
    levels_table = IQ4_LEVELS

    @classmethod
    def decode_fields(cls, blocks):
        n = blocks.shape[0]
        d = f16(blocks[:, 0:2])
        high_bits = np.ascontiguousarray(blocks[:, 2:4]).view("<u2").reshape(n, 1)
        high = np.concatenate([(high_bits >> (2 * j)) & 0x03 for j in range(8)], axis=1)
        low = nibbles(blocks[:, 4:8]).transpose(0, 2, 1).reshape(n, 8)   # scale j: byte j // 2, nibble j % 2
        sc = (low | (high << 4)).astype(np.int32)
        codes = nibbles(blocks[:, 8:136].reshape(n * 8, 16)).reshape(n, 256).astype(np.int32)
        return dict(codes=codes, d=d, sub_scales=sc, scales=d.reshape(-1, 1) * (sc - 32).astype(np.float32))
