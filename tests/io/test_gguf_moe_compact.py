"""A mixture-of-experts GGUF's experts multiplied from their quantized blocks (io/gguf/compact.py):
one expert is its own slice of the 3-D experts tensor [n_expert, out, in] (a view of those bytes
only), and its products equal the float32 product of that expert's dequantized weights (gguf-py's
dequantization of the slice) within float32 rounding; a pass decodes only the experts it routes
to, and never dequantizes a 3-D tensor."""
from pathlib import Path

import numpy as np
import pytest

from tests.gguf_packers import pack
from transformer_stepper import load_model
from transformer_stepper.core.model import quantized
from transformer_stepper.core.model.tokenize import Encoded
from transformer_stepper.io.gguf.compact import compact_weight
from transformer_stepper.io.gguf.file import GGUFFile
from transformer_stepper.io.gguf.model import ExpertSlice
from transformer_stepper.io.keymaps import Transpose

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
U = 2.0 ** -24
N_EXPERT, OUT, IN = 4, 96, 512


class _Checkpoint:
    def __init__(self, where: dict) -> None:
        self.where = where


def _experts_file(path: Path, kind: str) -> GGUFFile:
    import gguf
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((N_EXPERT, OUT, IN)) * 0.02).astype(np.float32)
    data = np.stack([pack(w[e], kind) for e in range(N_EXPERT)])
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    writer.add_tensor("blk.0.ffn_up_exps.weight", data, raw_shape=data.shape,
                      raw_dtype=gguf.GGMLQuantizationType[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return GGUFFile(path)


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K"])
@pytest.mark.parametrize("n", [1, 2, 3, 40])
@pytest.mark.parametrize("numba", [True, False])
def test_an_expert_product_equals_its_dequantized_slice(tmp_path, monkeypatch, kind, n, numba):
    if not numba:      # where numba cannot be imported, gguf-py decodes the expert's tiles
        monkeypatch.setattr(quantized, "kernels", lambda: None)
    f = _experts_file(tmp_path / "experts.gguf", kind)
    stored = "blk.0.ffn_up_exps.weight"
    rng = np.random.default_rng(n)
    for e in (0, 2, 3):
        ckpt = _Checkpoint({"up": (f, stored, ExpertSlice(e))})
        weight = compact_weight(ckpt, "up", Transpose(), (IN, OUT), table=False)
        slice_bytes = f.tensors[stored].data[e]
        assert weight.matrix.codes.shape == slice_bytes.shape
        assert np.shares_memory(weight.matrix.codes, slice_bytes)
        for other in set(range(N_EXPERT)) - {e}:
            assert not np.shares_memory(weight.matrix.codes, f.tensors[stored].data[other])
        w = f.expert(stored, e)                       # gguf-py's dequantization of the slice [out, in]
        x = rng.standard_normal((n, IN)).astype(np.float32)
        exact = x.astype(np.float64) @ w.astype(np.float64).T
        bound = (IN + 1) * U * (np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64).T)
        y = weight.times_transposed(x)
        assert y.shape == (n, OUT) and (np.abs(y - exact) <= bound).all()
        assert not (y == 0).all()


def test_a_pass_decodes_only_the_routed_experts_and_no_3d_tensor():
    model = load_model(FIXTURES / "gguf_moe" / "qwen3_moe_tiny.Q8_0.gguf")
    params = model.params
    from_blocks: list[str] = []
    sliced: list[tuple[str, int]] = []
    whole: list[str] = []
    product = params.product

    def counting_product(name, x, table=False):
        y = product(name, x, table)
        if y is not None and ".moe.expert." in name:
            from_blocks.append(name)
        return y
    params.product = counting_product
    for f in params.ckpt.files:
        expert, get = f.expert, f.get
        f.expert = lambda name, e, expert=expert: sliced.append((name, e)) or expert(name, e)
        f.get = lambda name, get=get: whole.append(name) or get(name)
    ids = np.array([5, 9], dtype=np.int64)
    trace = model.trace_encoded(Encoded(tokens=("a", "b"), input_ids=ids, token_type_ids=np.zeros(2, np.int64),
                                        offsets=np.zeros((2, 2), np.int64),
                                        special_tokens_mask=np.zeros(2, bool), truncated=False))
    chosen = {(layer, int(e)) for layer in (0, 2) for e in np.unique(trace.layer("expert_ids", layer))}
    # the fixture's gate and up experts are Q8_0 (multiplied from their blocks), its down
    # experts F32 (d_expert 16 is no whole Q8_0 block: a view of the slice, no dequantization)
    by_leaf: dict[str, set] = {}
    for name in from_blocks:
        _, layer, _, _, e, leaf, _ = name.split(".")
        by_leaf.setdefault(leaf, set()).add((int(layer), int(e)))
    assert by_leaf == {"gate": chosen, "up": chosen}
    assert {(int(name.split(".")[1]), e) for name, e in sliced} == chosen
    assert {name.split(".")[2] for name, _ in sliced} == {"ffn_down_exps"}
    assert not [name for name in whole if name.endswith("_exps.weight")]
    assert len(chosen) < 2 * model.config.n_expert
    assert params.nbytes_widened() == 0                        # nothing dequantized was kept
