"""One quantization block of a GGUF tensor, decoded: the stored codes, the block's scale(s) and
min(s), the formula of its quant type, and the float32 values they give (equal to what the
gguf package's dequantizer gives for that block). What the dequantization panel shows.

The layouts and their arithmetic are core/model/quant_types (one class per type: Q8_0, Q4_0, Q4_1,
Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS). Other block types the gguf package reads are
dequantized by it (values shown) without their codes decoded, and say so."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...core.model.errors import ModelError
from ...core.model.quant_types import QUANT_TYPES, Decoded

FORMULAS = {
    "F32": "w = stored float32",
    "F16": "w = float32(stored float16)",
    "BF16": "w = float32(stored bfloat16)",
    **{name: kind.formula for name, kind in QUANT_TYPES.items()},
}
GRID = {name: kind.code_range for name, kind in QUANT_TYPES.items()}


@dataclass(frozen=True)
class Block:
    quant_type: str
    row: int
    block: int                  # index of the block within the row
    block_size: int             # weights per block
    formula: str
    values: np.ndarray          # [block_size] float32, as the forward pass reads them (stored layout)
    codes: Optional[np.ndarray]     # [block_size] int, the stored integer codes; None if not decoded
    scales: Optional[np.ndarray]    # per sub-block effective scale (d · sc, d · (sc − 32) ...), or [d]
    mins: Optional[np.ndarray]      # per sub-block effective min (dmin · m), types with mins only
    note: str = ""
    d: Optional[float] = None       # the block's scale (float16 d, MXFP4's 2^(e − 128)) as float32
    dmin: Optional[float] = None    # the float16 super-min (types with mins)
    sub_scales: Optional[np.ndarray] = None   # the stored integer sub-block scales sc (K types, IQ4_XS)
    sub_mins: Optional[np.ndarray] = None     # the stored integer sub-block mins m
    decoded: Optional[Decoded] = None         # the block as core/model/quant_types decoded it

    @property
    def kind(self):
        """The block's core.model.quant_types class (None for float tensors and undecoded types)."""
        return QUANT_TYPES.get(self.quant_type) if self.codes is not None else None

    @property
    def sub_block_size(self) -> int:
        """Weights that share one scale (and min): 32 for Q4_K, 16 for Q6_K, the block otherwise."""
        kind = QUANT_TYPES.get(self.quant_type)
        return kind.sub_block_size if kind is not None else self.block_size

    @property
    def n_sub_blocks(self) -> int:
        return self.block_size // self.sub_block_size

    def sub_block_table(self) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
        """(headers, rows as text): each sub-block's stored scale (and min) and effective ones."""
        return self.kind.sub_block_table(self.decoded, 0) if self.kind is not None else ((), [])


def _expert_rows(gguf_file, name: str, stored: np.ndarray, expert: Optional[int]) -> np.ndarray:
    # a 3-D experts tensor [n_expert, rows, ...] -> expert `expert`'s rows; other tensors as they are
    if stored.ndim < 3 and expert is None:
        return stored
    if stored.ndim < 3:
        raise ModelError(f"{name}: not a 3-D experts tensor, so there is no expert {expert}")
    if expert is None or not 0 <= expert < stored.shape[0]:
        raise ModelError(f"{gguf_file.path}: {name} holds {stored.shape[0]} experts; "
                         f"{'name one' if expert is None else f'there is no expert {expert}'}")
    return stored[expert]


def block_of(gguf_file, name: str, row: int, block: int, expert: Optional[int] = None) -> Block:
    """Block `block` of row `row` of the stored tensor `name` (GGUF's own layout and name); of a
    3-D experts tensor [n_expert, rows, in], row `row` of expert `expert`'s slice (only that
    block is read)."""
    if name not in gguf_file.tensors:
        raise ModelError(f"{gguf_file.path}: no tensor {name}")
    kind_name = gguf_file.quant_type(name)
    stored = _expert_rows(gguf_file, name, gguf_file.stored(name), expert)
    stored2 = stored.reshape(1, -1) if stored.ndim == 1 else stored.reshape(stored.shape[0], -1)
    if not 0 <= row < stored2.shape[0]:
        raise ModelError(f"{name}: row {row} is outside its {stored2.shape[0]} rows")
    import gguf
    block_size, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kind_name]]
    if kind_name in ("F32", "F16", "BF16"):   # no blocks: shown in runs of 32 like Q8_0's
        block_size, type_size = 32, 32 * stored2.dtype.itemsize
    n_blocks = -(-stored2.shape[1] * stored2.dtype.itemsize // type_size)
    if not 0 <= block < n_blocks:
        raise ModelError(f"{name}: block {block} is outside the row's {n_blocks} blocks")
    if kind_name in ("F32", "F16", "BF16"):
        if expert is not None:
            whole = gguf_file.expert(name, expert)[row:row + 1]
        else:
            whole = gguf_file.get(name) if stored.ndim == 1 else gguf_file.rows(name, slice(row, row + 1))
        values = whole.reshape(-1)[block * block_size:(block + 1) * block_size]
        return Block(kind_name, row, block, block_size, FORMULAS[kind_name], np.asarray(values, np.float32),
                     None, None, None, "not quantized: each weight is stored on its own")
    raw = np.ascontiguousarray(stored2[row].view(np.uint8)[block * type_size:(block + 1) * type_size])
    kind = QUANT_TYPES.get(kind_name)
    if kind is None:
        values = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[kind_name]).reshape(-1).astype(np.float32)
        return Block(kind_name, row, block, block_size, f"{kind_name}: dequantized by the gguf package",
                     values, None, None, None, f"the codes of {kind_name} blocks are not decoded here")
    dec = kind.decode(raw.reshape(1, -1))
    return Block(kind_name, row, block, block_size, kind.formula, dec.values[0], dec.codes[0], dec.scales[0],
                 _first(dec.mins), d=float(dec.d[0]), dmin=None if dec.dmin is None else float(dec.dmin[0]),
                 sub_scales=_first(dec.sub_scales), sub_mins=_first(dec.sub_mins), decoded=dec)


def _first(array: Optional[np.ndarray]) -> Optional[np.ndarray]:
    return None if array is None else array[0]


def _g(value) -> str:
    return f"{float(value):.7g}"


def arithmetic(block: Block, k: int) -> list[tuple[str, float]]:
    """The steps from the stored numbers to weight `k` of the block, each (label, value), in
    float32 as the dequantizer computes them; the last step's value is block.values[k]."""
    if not 0 <= k < block.block_size:
        raise ModelError(f"weight {k} is outside the block's {block.block_size}")
    value = float(block.values[k])
    if block.codes is None:
        return [(f"{block.quant_type} weight {k} of block {block.block}, as stored", value)]
    return block.kind.steps(block.decoded, 0, k)


def formula_with_numbers(block: Block, k: int) -> str:
    """The quant type's formula for weight k, with the block's numbers put in: what the
    dequantization panel prints under the general formula."""
    label, value = arithmetic(block, k)[-1]
    return f"{label} = {_g(value)}"


def code_histogram(block: Block) -> tuple[np.ndarray, np.ndarray]:
    """(grid codes, how many weights of the block use each): the quantization grid's occupancy."""
    if block.codes is None:
        raise ModelError(f"{block.quant_type}: no integer grid to count")
    low, high = GRID[block.quant_type]
    grid = np.arange(low, high + 1)
    return grid, np.bincount(block.codes - low, minlength=len(grid))


def relative_error(quantized: np.ndarray, full: np.ndarray) -> float:
    """‖W_q − W‖ / ‖W‖ of a dequantized tensor against its unquantized twin."""
    if quantized.shape != full.shape:
        raise ModelError(f"shapes differ: {quantized.shape} vs {full.shape}")
    norm = float(np.linalg.norm(full.astype(np.float64)))
    return float(np.linalg.norm((quantized - full).astype(np.float64))) / norm if norm else 0.0
