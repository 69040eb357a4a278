"""The project's block packers (tests/gguf_packers.py) write llama.cpp's layouts: integer fields
laid out by each encode_* come back from gguf.quants.dequantize as exactly the type's formula of
those fields (bit for bit) and from core/model/quant_types as the same fields; pack_* of random weights
is within each format's rounding of them; MXFP4 packs byte for byte as gguf-py does."""
import gguf
import numpy as np
import pytest

from tests import gguf_packers as P
from transformer_stepper.core.model.quant_types import quant_type

N = 16


def _fields(name: str, rng):
    """Random integer fields and float16 scales of N blocks of `name`, and the weights the type's
    formula gives from them (float32, in gguf-py's order: effective scale · level − effective min)."""
    d = (rng.uniform(0.001, 0.05, N)).astype(np.float16).astype(np.float32)
    dmin = (rng.uniform(0.001, 0.05, N)).astype(np.float16).astype(np.float32)
    per_sub = (lambda a, size: np.repeat(a, size, axis=1))
    if name in ("Q5_K", "Q2_K"):
        n_sub, sub, top, scale_top = (8, 32, 31, 63) if name == "Q5_K" else (16, 16, 3, 15)
        sc, mn = rng.integers(0, scale_top + 1, (N, n_sub)), rng.integers(0, scale_top + 1, (N, n_sub))
        q = rng.integers(0, top + 1, (N, 256))
        encode = P.encode_q5_k if name == "Q5_K" else P.encode_q2_k
        w = per_sub(d[:, None] * sc.astype(np.float32), sub) * q.astype(np.float32) \
            - per_sub(dmin[:, None] * mn.astype(np.float32), sub)
        return encode(d, dmin, sc, mn, q), w, dict(codes=q, sub_scales=sc, sub_mins=mn, d=d, dmin=dmin)
    if name == "Q3_K":
        sc, q = rng.integers(0, 64, (N, 16)), rng.integers(0, 8, (N, 256))
        w = per_sub(d[:, None] * (sc - 32).astype(np.float32), 16) * (q - 4).astype(np.float32)
        return P.encode_q3_k(d, sc, q), w, dict(codes=q, sub_scales=sc, d=d)
    if name == "IQ4_XS":
        sc, q = rng.integers(0, 64, (N, 8)), rng.integers(0, 16, (N, 256))
        w = per_sub(d[:, None] * (sc - 32).astype(np.float32), 32) * P.IQ4_LEVELS[q]
        return P.encode_iq4_xs(d, sc, q), w, dict(codes=q, sub_scales=sc, d=d)
    q = rng.integers(0, 16, (N, 32))
    if name == "IQ4_NL":
        return P.encode_iq4_nl(d, q), d[:, None] * P.IQ4_LEVELS[q], dict(codes=q, d=d)
    e = rng.integers(110, 140, N)
    scale = (2.0 ** (e - 128.0)).astype(np.float32)
    return P.encode_mxfp4(e, q), scale[:, None] * P.MXFP4_LEVELS[q], dict(codes=q, d=scale)


NEW = ("Q5_K", "Q3_K", "Q2_K", "IQ4_XS", "IQ4_NL", "MXFP4")
# ‖dequantized − w‖ / ‖w‖ of Gaussian weights, a little above what these round-to-nearest
# packers give (Q2_K's 2-bit codes lose a third of the norm; llama-quantize's search does better)
RELATIVE_ERROR = {"Q4_K": 0.09, "Q6_K": 0.025, "Q5_K": 0.045, "Q3_K": 0.17, "Q2_K": 0.36,
                  "IQ4_XS": 0.09, "IQ4_NL": 0.09, "MXFP4": 0.13}


@pytest.mark.parametrize("name", NEW)
def test_encoded_fields_dequantize_to_the_formula_bit_for_bit(name):
    blocks, expected, fields = _fields(name, np.random.default_rng(7))
    kind = quant_type(name)
    assert blocks.dtype == np.uint8 and blocks.shape == (N, kind.type_size)
    got = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[name])
    np.testing.assert_array_equal(got.view(np.uint32), expected.astype(np.float32).view(np.uint32))
    decoded = kind.decode(blocks)                 # and the app reads the same fields back
    for field, value in fields.items():
        np.testing.assert_array_equal(getattr(decoded, field), value, err_msg=field)


@pytest.mark.parametrize("name", sorted(RELATIVE_ERROR))
def test_packed_weights_are_within_the_formats_rounding(name):
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((32, 512)) * 0.05).astype(np.float32)
    w[0, :256] = 0.0                                   # an all-zero block packs to zeros
    packed = P.pack(w, name)
    back = gguf.quants.dequantize(packed, gguf.GGMLQuantizationType[name])
    assert back.shape == w.shape and np.isfinite(back).all()
    np.testing.assert_array_equal(back[0, :256], 0.0)
    error = np.linalg.norm(back - w) / np.linalg.norm(w)
    assert 0 < error < RELATIVE_ERROR[name], error
    np.testing.assert_array_equal(quant_type(name).dequantize(packed), back)


def test_mxfp4_packs_as_gguf_py_does():
    w = (np.random.default_rng(5).standard_normal((8, 256)) * 0.1).astype(np.float32)
    np.testing.assert_array_equal(P.pack(w, "MXFP4"), gguf.quants.quantize(w, gguf.GGMLQuantizationType.MXFP4))


def test_a_row_that_is_not_whole_blocks_is_refused():
    with pytest.raises(ValueError, match="Q5_K needs rows of a multiple of 256"):
        P.pack(np.zeros((2, 96), np.float32), "Q5_K")
