"""The blocks behind a mixture-of-experts GGUF's expert weights (io/gguf/weights.py, blocks.py,
dequantization.py): a layer's 3-D experts tensors are listed, a core expert weight's place names
its expert, row, block and place in the block, and the block decoded there gives exactly the
weight the forward pass reads (gguf-py's dequantization of that expert's slice)."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.gguf.dequantization import readout
from transformer_stepper.io.gguf.weights import block_at, layer_tensors, place_of, weight_arithmetic

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gguf_moe" / "qwen3_moe_tiny.Q8_0.gguf"


@pytest.fixture(scope="module")
def model():
    return load_model(FIXTURE)


def test_a_layer_lists_its_3d_experts_tensors(model):
    sources = {s.tensor: s for s in layer_tensors(model, 0)}
    n_expert = model.config.n_expert
    for leaf, rows in (("ffn_gate_exps", model.config.d_expert_ff), ("ffn_up_exps", model.config.d_expert_ff),
                       ("ffn_down_exps", model.config.d_model)):
        source = sources[f"blk.0.{leaf}.weight"]
        assert (source.n_experts, source.n_rows) == (n_expert, rows)
        assert len(source.params) == n_expert and "{e}" in source.params_text()
    assert sources["blk.0.attn_q.weight"].n_experts == 0
    assert "blk.0.ffn_gate_inp.weight" in sources


@pytest.mark.parametrize("param, index", [("h.0.moe.expert.3.gate.w", (5, 2)), ("h.2.moe.expert.15.up.w", (31, 7)),
                                          ("h.0.moe.expert.9.proj.w", (4, 30))])
def test_an_expert_weight_is_decoded_from_its_own_block(model, param, index):
    place = place_of(model, param, index)
    e = int(param.split(".")[4])
    assert place.expert == e
    assert (place.row, place.column) == (index[1], index[0])           # core [in, out] = HF [out, in].T
    _, block, steps = weight_arithmetic(model, param, index)
    assert steps[-1][1] == float(model.params[param][index])           # the weight the pass reads
    f = model.params.ckpt.files[0]
    stored = place.source.tensor
    size = block.block_size
    np.testing.assert_array_equal(block.values, f.expert(stored, e)[place.row, place.block * size:(place.block + 1) * size])
    text = readout(model, stored, place.row, place.block, place.position, e).header
    assert f"Expert {e} of {model.config.n_expert}, row {place.row}" in text


def test_a_block_of_an_experts_tensor_needs_its_expert(model):
    with pytest.raises(ModelError, match="blk.0.ffn_gate_exps.weight holds 16 experts; name one"):
        block_at(model, "blk.0.ffn_gate_exps.weight", 0, 0)
    with pytest.raises(ModelError, match="there is no expert 16"):
        block_at(model, "blk.0.ffn_gate_exps.weight", 0, 0, 16)
    with pytest.raises(ModelError, match="not a 3-D experts tensor"):
        block_at(model, "blk.0.attn_q.weight", 0, 0, 1)
