"""Every registered quant type decodes random blocks to exactly gguf-py's dequantized weights
(bit for bit), its codes lie on its grid, and its stored fields rebuild the weights through
the type's formula; the per-weight steps end on the weight."""
import gguf
import numpy as np
import pytest

from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.model.quant_types import QUANT_TYPES, quant_type

NEW = ("Q5_K", "Q3_K", "Q2_K", "IQ4_XS", "IQ4_NL", "MXFP4")
# where each type keeps its float16 scale(s): random bytes there could be inf or NaN
F16_AT = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "IQ4_NL": (0,), "MXFP4": (), "Q2_K": (80, 82), "Q3_K": (108,),
          "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "IQ4_XS": (0,)}


def random_blocks(name: str, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (n, QUANT_TYPES[name].type_size), dtype=np.uint8)
    for at in F16_AT[name]:
        scale = (rng.standard_normal(n) * 0.02).astype(np.float16)
        blocks[:, at:at + 2] = scale.view(np.uint8).reshape(n, 2)
    if name == "MXFP4":         # exponents around 2^0 (12 · 2^127 overflows float32)
        blocks[:, 0] = rng.integers(100, 150, n)
    return blocks


def test_the_new_types_are_registered_with_ggmls_sizes():
    assert set(NEW) <= set(QUANT_TYPES)
    for name, kind in QUANT_TYPES.items():
        assert (kind.block_size, kind.type_size) == gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]]
        assert kind.block_size % kind.sub_block_size == 0


@pytest.mark.parametrize("name", sorted(F16_AT))
def test_decode_equals_gguf_py_bit_for_bit(name):
    blocks = random_blocks(name, 64)
    expected = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[name])
    decoded = quant_type(name).decode(blocks)
    assert decoded.values.dtype == np.float32
    np.testing.assert_array_equal(decoded.values.view(np.uint32), expected.view(np.uint32))
    low, high = quant_type(name).code_range
    assert decoded.codes.min() >= low and decoded.codes.max() <= high
    assert decoded.codes.min() == low and decoded.codes.max() == high   # 64 random blocks reach both ends
    # a whole row of blocks at once, through the plain numpy path
    row = blocks.reshape(4, -1)
    np.testing.assert_array_equal(quant_type(name).dequantize(row),
                                  gguf.quants.dequantize(row, gguf.GGMLQuantizationType[name]))


@pytest.mark.parametrize("name", sorted(F16_AT))
def test_steps_end_on_the_weight_and_quote_the_stored_numbers(name):
    kind = quant_type(name)
    decoded = kind.decode(random_blocks(name, 3, seed=1))
    for b, k in ((0, 0), (1, kind.block_size - 1), (2, kind.block_size // 2 + 3)):
        steps = kind.steps(decoded, b, k)
        assert steps[-1][1] == float(decoded.values[b, k])
        labels = dict(steps)
        assert labels[f"q[{k}] (stored code)"] == decoded.codes[b, k]
        j = k // kind.sub_block_size
        assert f"{float(decoded.scales[b, j]):.7g}" in steps[-1][0]


def test_fields_rebuild_the_weights_through_each_formula():
    """The fields written out in each type's own formula (independent of decode's arithmetic)."""
    def check(name, expected_of):
        d = quant_type(name).decode(random_blocks(name, 8, seed=2))
        np.testing.assert_array_equal(d.values, expected_of(d).astype(np.float32))

    def per_sub(d, x, size):
        return np.repeat(x, size, axis=1)
    iq4 = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)
    fp4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float32)
    check("Q5_K", lambda d: per_sub(d, d.d[:, None] * d.sub_scales, 32) * d.codes
          - per_sub(d, d.dmin[:, None] * d.sub_mins, 32))
    check("Q2_K", lambda d: per_sub(d, d.d[:, None] * d.sub_scales, 16) * d.codes
          - per_sub(d, d.dmin[:, None] * d.sub_mins, 16))
    check("Q3_K", lambda d: per_sub(d, d.d[:, None] * (d.sub_scales - 32), 16) * (d.codes - 4))
    check("IQ4_XS", lambda d: per_sub(d, d.d[:, None] * (d.sub_scales - 32), 32) * iq4[d.codes])
    check("IQ4_NL", lambda d: d.d[:, None] * iq4[d.codes])
    check("MXFP4", lambda d: d.d[:, None] * fp4[d.codes])
    for name in ("Q5_K", "Q2_K", "Q3_K", "IQ4_XS"):
        d = quant_type(name).decode(random_blocks(name, 8, seed=2))
        bits = {"Q5_K": 6, "Q2_K": 4, "Q3_K": 6, "IQ4_XS": 6}[name]
        assert d.sub_scales.min() >= 0 and d.sub_scales.max() < 2 ** bits


def test_mxfp4_scale_is_a_power_of_two_from_its_exponent_byte():
    blocks = random_blocks("MXFP4", 256)
    blocks[:, 0] = np.arange(256, dtype=np.uint8)
    blocks[:, 1:] = 0x11                    # every code 1: level 1, so w = d
    d = quant_type("MXFP4").decode(blocks).d
    np.testing.assert_array_equal(d.astype(np.float64), 2.0 ** (np.arange(256) - 128.0))
    np.testing.assert_array_equal(quant_type("MXFP4").decode(blocks).values[:, 0], d)
    assert [quant_type("MXFP4").exponent(x) for x in d[[0, 1, 127, 255]]] == [0, 1, 127, 255]


def test_an_unregistered_type_is_named():
    with pytest.raises(ModelError, match="quant type IQ2_XXS has no block decoder"):
        quant_type("IQ2_XXS")
