"""Where each weight of a GGUF model is stored: the stored row/block/place of a core weight,
decoded by io/gguf_blocks, gives exactly the value the forward pass reads (through the key
map's transpose, GPT-2's fused c_attn, Llama's permuted q/k rows and Gemma's 1 + w)."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.gguf.blocks import formula_with_numbers
from transformer_stepper.io.gguf.weights import (
    is_gguf,
    layer_tensors,
    place_of,
    tensor_sources,
    weight_arithmetic,
    why_not_gguf)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gguf"
IQ4 = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)    # ggml's kvalues_iq4nl
GRID_RANGE = {"Q8_0": (-128, 128), "Q4_0": (0, 16), "Q4_K": (0, 16), "Q6_K": (0, 64), "Q5_K": (0, 32),
              "Q3_K": (0, 8), "Q2_K": (0, 4)}
FILES = ["llama_k.Q4_K_M.gguf", "gemma_k.Q6_K.gguf", "gpt2_small.Q4_0.gguf", "llama_small.Q8_0.gguf",
         "llama_small.F16.gguf", "llama_k.Q5_K_M.gguf", "llama_k.Q3_K_M.gguf", "llama_k.Q2_K.gguf",
         "llama_k.IQ4_XS.gguf", "llama_small.IQ4_NL.gguf", "llama_small.MXFP4.gguf"]


@pytest.fixture(scope="module", params=FILES)
def model(request):
    return load_model(FIXTURES / request.param)


def test_every_weight_decodes_to_what_the_forward_pass_reads(model):
    rng = np.random.default_rng(0)
    checked = set()
    for param in model.params:
        shape = model.params.shape(param)
        full = model.params[param]
        for _ in range(6):
            index = tuple(int(rng.integers(n)) for n in shape)
            place, block, steps = weight_arithmetic(model, param, index)
            assert steps[-1][1] == float(full[index]), (param, index, steps)
            assert block.quant_type == place.source.quant_type
            checked.add(place.source.quant_type)
    assert checked - {"F32"}            # a quantized or F16 tensor was among them


def test_llama_q_rows_are_found_where_llama_cpp_permuted_them():
    model = load_model(FIXTURES / "llama_k.Q4_K_M.gguf")
    d_head = model.config.d_head
    # core q.w is [d_model, n_head * d_head]: HF row (output) c of head 0; the first half's
    # element i was stored at row 2i, the second half's at 2i + 1
    assert place_of(model, "h.0.attn.q.w", (0, 1)).row == 2
    assert place_of(model, "h.0.attn.q.w", (0, d_head // 2 + 1)).row == 3
    assert place_of(model, "h.0.attn.q.w", (5, 0)).column == 5       # input dim = place in the row


def test_sources_name_file_tensor_and_quant_type():
    model = load_model(FIXTURES / "llama_k.Q4_K_M.gguf")
    sources = tensor_sources(model)
    assert sources["blk.0.attn_v.weight"].quant_type == "Q6_K"        # Q4_K_M's extra bits
    assert sources["blk.0.attn_q.weight"].quant_type == "Q4_K"
    assert sources["output.weight"].quant_type == "Q6_K"
    assert sources["blk.0.attn_q.weight"].params == ("h.0.attn.q.w",)
    assert "un-permuted" in sources["blk.0.attn_q.weight"].fix
    names = [s.tensor for s in layer_tensors(model, 0)]
    assert names[-2:] == ["token_embd.weight", "output.weight"]
    assert all(n.startswith("blk.0.") for n in names[:-2]) and len(names) == 9 + 2
    gpt2 = load_model(FIXTURES / "gpt2_small.Q4_0.gguf")
    fused = tensor_sources(gpt2)["blk.0.attn_qkv.weight"]
    assert set(fused.params) == {"h.0.attn.q.w", "h.0.attn.k.w", "h.0.attn.v.w"}


def test_formula_with_numbers_quotes_the_block():
    model = load_model(FIXTURES / "llama_k.Q4_K_M.gguf")
    place, block, steps = weight_arithmetic(model, "h.0.mlp.up.w", (3, 7))
    j = place.position // 32
    text = formula_with_numbers(block, place.position)
    assert f"{float(block.scales[j]):.7g}" in text and f"{float(block.mins[j]):.7g}" in text
    assert f" {int(block.codes[place.position])} " in text
    assert text.endswith(f"= {float(model.params['h.0.mlp.up.w'][3, 7]):.7g}")
    # the effective scale is d · sc in float32, as listed
    assert np.float32(block.d) * np.float32(block.sub_scales[j]) == block.scales[j]


def test_non_gguf_models_say_why():
    model = load_model(None)
    assert not is_gguf(model) and "not a GGUF file" in why_not_gguf(model)
    with pytest.raises(ModelError, match="not a GGUF file"):
        tensor_sources(model)


@pytest.mark.parametrize("file_name, tensor, row, block", [
    ("llama_k.Q4_K_M.gguf", "blk.0.ffn_gate.weight", 9, 0), ("gemma_k.Q6_K.gguf", "blk.0.attn_q.weight", 3, 0),
    ("llama_small.Q4_0.gguf", "blk.0.attn_k.weight", 2, 1), ("llama_small.F16.gguf", "blk.0.attn_q.weight", 1, 0),
    ("llama_k.Q5_K_M.gguf", "blk.0.attn_k.weight", 4, 0), ("llama_k.Q3_K_M.gguf", "blk.0.ffn_gate.weight", 1, 0),
    ("llama_k.Q2_K.gguf", "blk.0.attn_q.weight", 7, 0), ("llama_k.IQ4_XS.gguf", "blk.0.ffn_up.weight", 2, 0),
    ("llama_small.IQ4_NL.gguf", "blk.0.attn_q.weight", 5, 1), ("llama_small.MXFP4.gguf", "blk.1.ffn_down.weight", 3, 2)])
def test_dequantization_readout_is_the_block_laid_out(file_name, tensor, row, block):
    """What the panel draws and prints: io/gguf_blocks' numbers, laid out by sub-block."""
    from transformer_stepper.io.gguf.dequantization import readout
    from transformer_stepper.io.gguf.blocks import block_of, code_histogram
    from transformer_stepper.io.gguf.file import GGUFFile

    model = load_model(FIXTURES / file_name)
    r = readout(model, tensor, row, block, position=5)
    b = block_of(GGUFFile(FIXTURES / file_name), tensor, row, block)
    size = {"Q4_K": 32, "Q6_K": 16, "Q5_K": 32, "Q3_K": 16, "Q2_K": 16, "IQ4_XS": 32}.get(b.quant_type, 32)
    np.testing.assert_array_equal(r.values, b.values.reshape(-1, size))
    assert r.value == float(b.values[5]) and r.numbers == formula_with_numbers(b, 5)
    assert r.formula == b.formula and r.source.quant_type == b.quant_type
    if b.codes is None:
        assert r.codes is None and r.grid is None and "not quantized" in r.scales_text
        return
    np.testing.assert_array_equal(r.codes, b.codes.reshape(-1, size))
    np.testing.assert_array_equal(r.grid[1], code_histogram(b)[1])
    levels = {"IQ4_XS": IQ4, "IQ4_NL": IQ4, "MXFP4": (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)}
    expected_labels = levels[b.quant_type] if b.quant_type in levels else range(*GRID_RANGE[b.quant_type])
    assert r.grid_labels == tuple(str(v) for v in expected_labels)
    assert f"d = {b.d:.6g}" in r.scales_text or f"= {b.d:.6g}, e = " in r.scales_text
    if b.sub_scales is not None:
        assert [int(row[1]) for row in r.sub_blocks] == b.sub_scales.tolist()
        effective = r.sub_headers.index(next(h for h in r.sub_headers if h.startswith("d·")))
        assert [float(row[effective]) for row in r.sub_blocks] == [float(f"{s:.6g}") for s in b.scales]
        if b.mins is not None:
            assert r.sub_headers[-2:] == ("m", "dmin·m")
            assert [int(row[-2]) for row in r.sub_blocks] == b.sub_mins.tolist()
    else:
        assert r.sub_blocks == [] and b.quant_type in ("Q8_0", "Q4_0", "IQ4_NL", "MXFP4")
