"""The 32-weight block types with one scale per block (ggml-common.h): Q8_0, Q4_0, Q4_1, Q5_0,
Q5_1, IQ4_NL and MXFP4 (gpt-oss's experts). 4-bit codes are packed two to a byte, weights 0-15
in the low nibbles and 16-31 in the high nibbles; Q5_0/Q5_1 keep every weight's fifth bit in
one little-endian uint32 (bit i: weight i)."""
from __future__ import annotations

import numpy as np

from .base import QuantType, f16, nibbles

# ggml's kvalues_iq4nl: a non-linear 4-bit grid, denser near 0
IQ4_LEVELS = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)
# ggml's kvalues_mxfp4: the e2m1 (FP4) values 0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6, doubled
MXFP4_LEVELS = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)


def _one_scale(d: np.ndarray) -> np.ndarray:
    return d.reshape(-1, 1)


class Q8_0(QuantType, name="Q8_0"):
    """fp16 d, 32 int8 codes."""
    block_size, type_size, sub_block_size, code_range = 32, 34, 32, (-128, 127)
    formula = "w[i] = d · q[i]        (32 weights, q int8 in [-128, 127], d float16)"

    @classmethod
    def decode_fields(cls, blocks):
        d = f16(blocks[:, 0:2])
        return dict(codes=blocks[:, 2:34].view(np.int8).astype(np.int32), d=d, scales=_one_scale(d))


class Q4_0(QuantType, name="Q4_0"):
    """fp16 d, 16 bytes of nibbles."""
    block_size, type_size, sub_block_size, code_range = 32, 18, 32, (0, 15)
    formula = "w[i] = d · (q[i] − 8)  (32 weights, q in [0, 15], d float16)"
    level_text = "(q − 8)"

    @classmethod
    def decode_fields(cls, blocks):
        d = f16(blocks[:, 0:2])
        codes = nibbles(blocks[:, 2:18]).reshape(-1, 32).astype(np.int32)
        return dict(codes=codes, d=d, scales=_one_scale(d))

    @classmethod
    def levels(cls, codes):
        return (codes - 8).astype(np.float32)


class Q4_1(QuantType, name="Q4_1"):
    """fp16 d, fp16 m, 16 bytes of nibbles."""
    block_size, type_size, sub_block_size, code_range = 32, 20, 32, (0, 15)
    formula = "w[i] = d · q[i] + m  (32 weights, q in [0, 15], d and m float16)"
    has_mins = min_plus = True

    @classmethod
    def decode_fields(cls, blocks):
        d, m = f16(blocks[:, 0:2]), f16(blocks[:, 2:4])
        codes = nibbles(blocks[:, 4:20]).reshape(-1, 32).astype(np.int32)
        return dict(codes=codes, d=d, scales=_one_scale(d), dmin=m, mins=_one_scale(m))


def _fifth_bits(raw: np.ndarray) -> np.ndarray:
    """[n, 4] uint8 (a little-endian uint32) -> [n, 32]: bit i, weight i's fifth bit."""
    qh = np.ascontiguousarray(raw).view("<u4").reshape(-1, 1)
    return ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int32)


class Q5_0(QuantType, name="Q5_0"):
    """fp16 d, qh (uint32 of fifth bits), 16 bytes of nibbles."""
    block_size, type_size, sub_block_size, code_range = 32, 22, 32, (0, 31)
    formula = "w[i] = d · (q[i] − 16)  (32 weights, q in [0, 31] = 4-bit nibble | bit i of qh << 4, d float16)"
    level_text = "(q − 16)"

    @classmethod
    def decode_fields(cls, blocks):
        d = f16(blocks[:, 0:2])
        codes = nibbles(blocks[:, 6:22]).reshape(-1, 32).astype(np.int32) | (_fifth_bits(blocks[:, 2:6]) << 4)
        return dict(codes=codes, d=d, scales=_one_scale(d))

    @classmethod
    def levels(cls, codes):
        return (codes - 16).astype(np.float32)


class Q5_1(QuantType, name="Q5_1"):
    """fp16 d, fp16 m, qh (uint32 of fifth bits), 16 bytes of nibbles."""
    block_size, type_size, sub_block_size, code_range = 32, 24, 32, (0, 31)
    formula = "w[i] = d · q[i] + m  (32 weights, q in [0, 31] = 4-bit nibble | bit i of qh << 4, d and m float16)"
    has_mins = min_plus = True

    @classmethod
    def decode_fields(cls, blocks):
        d, m = f16(blocks[:, 0:2]), f16(blocks[:, 2:4])
        codes = nibbles(blocks[:, 8:24]).reshape(-1, 32).astype(np.int32) | (_fifth_bits(blocks[:, 4:8]) << 4)
        return dict(codes=codes, d=d, scales=_one_scale(d), dmin=m, mins=_one_scale(m))


class IQ4_NL(QuantType, name="IQ4_NL"):
    """fp16 d, 16 bytes of nibbles indexing a fixed non-linear grid of 16 levels."""
    block_size, type_size, sub_block_size, code_range = 32, 18, 32, (0, 15)
    formula = ("w[i] = d · kvalues[q[i]]  (32 weights, q in [0, 15] picks one of 16 non-linear levels "
               f"kvalues = {list(IQ4_LEVELS)}, d float16)")
    level_text = "kvalues[q]"
    levels_table = IQ4_LEVELS

    @classmethod
    def decode_fields(cls, blocks):
        d = f16(blocks[:, 0:2])
        return dict(codes=nibbles(blocks[:, 2:18]).reshape(-1, 32).astype(np.int32), d=d, scales=_one_scale(d))


def e8m0_half(e: np.ndarray) -> np.ndarray:
    """ggml_e8m0_to_fp32_half: the 8-bit exponent e as the float32 2^(e − 128), built from its
    bits (e < 2 gives float32 subnormals), as gguf-py does."""
    e = e.astype(np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - np.uint32(1)) << np.uint32(23))
    return bits.astype(np.uint32).view(np.float32)


class MXFP4(QuantType, name="MXFP4"):
    """One byte e8m0 exponent e, 16 bytes of nibbles: 4-bit FP4 (e2m1) codes, OCP microscaling."""
    block_size, type_size, sub_block_size, code_range = 32, 17, 32, (0, 15)
    formula = ("w[i] = 2^(e − 128) · kvalues[q[i]]  (32 weights; q in [0, 15] an FP4 e2m1 code, "
               f"kvalues its value doubled = {list(MXFP4_LEVELS)}; e the block's 8-bit exponent)")
    level_text = "kvalues[q]"
    scale_text = "2^(e − 128)"
    d_label = "d = 2^(e − 128) (the block's scale)"
    levels_table = MXFP4_LEVELS

    @classmethod
    def decode_fields(cls, blocks):
        d = e8m0_half(blocks[:, 0])
        return dict(codes=nibbles(blocks[:, 1:17]).reshape(-1, 32).astype(np.int32), d=d, scales=_one_scale(d))

    @classmethod
    def exponent(cls, d: float) -> int:
        """The stored e of a block's scale d = 2^(e − 128)."""
        return int(round(float(np.log2(np.float64(d))))) + 128

    @classmethod
    def steps(cls, decoded, b, k):
        return [("e (stored 8-bit exponent)", cls.exponent(decoded.d[b]))] + super().steps(decoded, b, k)
