"""Each decoded block equals what the gguf package's dequantizer gives for the same bytes, on
every quant type in the committed fixtures; the codes lie on the type's grid."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.gguf.blocks import GRID, block_of, code_histogram, relative_error
from transformer_stepper.io.gguf.file import GGUFFile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gguf"
CASES = [("llama_small.Q8_0.gguf", "blk.1.attn_q.weight"), ("llama_small.Q4_0.gguf", "blk.0.ffn_up.weight"),
         ("llama_k.Q4_K_M.gguf", "blk.0.attn_q.weight"), ("llama_k.Q4_K_M.gguf", "output.weight"),
         ("gemma_k.Q6_K.gguf", "blk.0.ffn_down.weight"), ("llama_small.F16.gguf", "blk.0.attn_k.weight"),
         ("llama_k.Q5_K_M.gguf", "blk.0.ffn_up.weight"), ("llama_k.Q3_K_M.gguf", "blk.0.attn_q.weight"),
         ("llama_k.Q3_K_M.gguf", "blk.0.attn_v.weight"), ("llama_k.Q2_K.gguf", "token_embd.weight"),
         ("llama_k.Q2_K.gguf", "blk.0.ffn_down.weight"), ("llama_k.IQ4_XS.gguf", "blk.0.attn_output.weight"),
         ("llama_small.IQ4_NL.gguf", "blk.1.ffn_gate.weight"), ("llama_small.MXFP4.gguf", "blk.0.attn_q.weight")]
NEW_TYPE_FILES = {"Q5_K": "llama_k.Q5_K_M.gguf", "Q3_K": "llama_k.Q3_K_M.gguf", "Q2_K": "llama_k.Q2_K.gguf",
                  "IQ4_XS": "llama_k.IQ4_XS.gguf", "IQ4_NL": "llama_small.IQ4_NL.gguf",
                  "MXFP4": "llama_small.MXFP4.gguf"}


@pytest.mark.parametrize("file_name, tensor", CASES)
def test_blocks_decode_to_the_dequantized_values(file_name, tensor):
    f = GGUFFile(FIXTURES / file_name)
    full = f.get(tensor)
    rows, cols = full.shape
    n_blocks = cols // (256 if f.quant_type(tensor).endswith(("_K", "_XS")) else 32)
    for row, block in ((0, 0), (rows - 1, n_blocks - 1), (rows // 2, 1 % n_blocks)):
        decoded = block_of(f, tensor, row, block)
        start = decoded.block * decoded.block_size
        np.testing.assert_array_equal(decoded.values, full[row, start:start + decoded.block_size])
        if decoded.codes is not None:
            low, high = GRID[decoded.quant_type]
            assert decoded.codes.min() >= low and decoded.codes.max() <= high
            grid, counts = code_histogram(decoded)
            assert counts.sum() == decoded.block_size and len(grid) == high - low + 1


@pytest.mark.parametrize("quant_type", sorted(NEW_TYPE_FILES))
def test_every_tensor_of_the_type_decodes_to_gguf_py_bit_for_bit(quant_type):
    """The whole tensor through core/model/quant_types = gguf.quants.dequantize = what the app reads."""
    import gguf
    from transformer_stepper.core.model.quant_types import quant_type as kind_of
    f = GGUFFile(FIXTURES / NEW_TYPE_FILES[quant_type])
    names = [name for name in f.tensors if f.quant_type(name) == quant_type]
    assert names
    for name in names:
        stored = np.asarray(f.stored(name))
        expected = gguf.quants.dequantize(stored, gguf.GGMLQuantizationType[quant_type])
        np.testing.assert_array_equal(kind_of(quant_type).dequantize(stored).view(np.uint32),
                                      expected.view(np.uint32), err_msg=name)
        np.testing.assert_array_equal(f.get(name), expected, err_msg=name)


def test_bad_block_requests_are_refused():
    f = GGUFFile(FIXTURES / "llama_small.Q8_0.gguf")
    with pytest.raises(ModelError, match="outside"):
        block_of(f, "blk.0.attn_q.weight", 0, 99)
    with pytest.raises(ModelError, match="no tensor"):
        block_of(f, "nope", 0, 0)


def test_quantized_vs_full_precision_error():
    q8, f16 = GGUFFile(FIXTURES / "llama_small.Q8_0.gguf"), GGUFFile(FIXTURES / "llama_small.F16.gguf")
    name = "blk.0.ffn_gate.weight"
    error = relative_error(q8.get(name), f16.get(name))
    assert 0 < error < 0.02   # 8-bit codes: well under 2 % of the weight's norm
    assert relative_error(f16.get(name), f16.get(name)) == 0.0
