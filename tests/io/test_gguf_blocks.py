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
         ("gemma_k.Q6_K.gguf", "blk.0.ffn_down.weight"), ("llama_small.F16.gguf", "blk.0.attn_k.weight")]


@pytest.mark.parametrize("file_name, tensor", CASES)
def test_blocks_decode_to_the_dequantized_values(file_name, tensor):
    f = GGUFFile(FIXTURES / file_name)
    full = f.get(tensor)
    rows, cols = full.shape
    n_blocks = cols // (256 if f.quant_type(tensor).endswith("_K") else 32)
    for row, block in ((0, 0), (rows - 1, n_blocks - 1), (rows // 2, 1 % n_blocks)):
        decoded = block_of(f, tensor, row, block)
        start = decoded.block * decoded.block_size
        np.testing.assert_array_equal(decoded.values, full[row, start:start + decoded.block_size])
        if decoded.codes is not None:
            low, high = GRID[decoded.quant_type]
            assert decoded.codes.min() >= low and decoded.codes.max() <= high
            grid, counts = code_histogram(decoded)
            assert counts.sum() == decoded.block_size and len(grid) == high - low + 1


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
