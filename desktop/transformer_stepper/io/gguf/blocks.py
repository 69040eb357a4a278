"""One quantization block of a GGUF tensor, decoded: the stored codes, the block's scale(s) and
min(s), the formula of its quant type, and the float32 values they give (equal to what the
gguf package's dequantizer gives for that block). What the dequantization panel shows.

Layouts (ggml-common.h): Q8_0 = fp16 d + 32 int8; Q4_0 = fp16 d + 16 bytes of nibbles (values
0-15 low nibbles, 16-31 high); Q4_K = fp16 d, fp16 dmin, 12 bytes of 6-bit scales/mins for 8
sub-blocks of 32, 128 bytes of nibbles; Q6_K = 128 bytes low nibbles, 64 bytes high 2 bits,
16 int8 scales of 16-value sub-blocks, fp16 d. Other block types are dequantized (values shown)
without their codes decoded, and say so."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...core.model.errors import ModelError

FORMULAS = {
    "F32": "w = stored float32",
    "F16": "w = float32(stored float16)",
    "BF16": "w = float32(stored bfloat16)",
    "Q8_0": "w[i] = d · q[i]        (32 weights, q int8 in [-128, 127], d float16)",
    "Q4_0": "w[i] = d · (q[i] − 8)  (32 weights, q in [0, 15], d float16)",
    "Q4_K": "w[i] = d · sc[j] · q[i] − dmin · m[j]  (256 weights in 8 sub-blocks j of 32; q in [0, 15]; sc, m 6-bit; d, dmin float16)",
    "Q6_K": "w[i] = d · sc[j] · (q[i] − 32)  (256 weights in 16 sub-blocks j of 16; q in [0, 63]; sc int8; d float16)",
}
GRID = {"Q8_0": (-128, 127), "Q4_0": (0, 15), "Q4_K": (0, 15), "Q6_K": (0, 63)}


@dataclass(frozen=True)
class Block:
    quant_type: str
    row: int
    block: int                  # index of the block within the row
    block_size: int             # weights per block
    formula: str
    values: np.ndarray          # [block_size] float32, as the forward pass reads them (stored layout)
    codes: Optional[np.ndarray]     # [block_size] int, the stored integer codes; None if not decoded
    scales: Optional[np.ndarray]    # per sub-block effective scale (d · sc), or [d]
    mins: Optional[np.ndarray]      # per sub-block effective min (dmin · m), Q4_K only
    note: str = ""
    d: Optional[float] = None       # the block's float16 super-scale (as float32)
    dmin: Optional[float] = None    # Q4_K's float16 super-min
    sub_scales: Optional[np.ndarray] = None   # the stored integer sub-block scales sc (K types)
    sub_mins: Optional[np.ndarray] = None     # Q4_K's stored integer sub-block mins m

    @property
    def sub_block_size(self) -> int:
        """Weights that share one scale (and min): 32 for Q4_K, 16 for Q6_K, the block otherwise."""
        return {"Q4_K": 32, "Q6_K": 16}.get(self.quant_type, self.block_size)

    @property
    def n_sub_blocks(self) -> int:
        return self.block_size // self.sub_block_size


def _f16(raw: np.ndarray) -> np.float32:
    return raw[:2].copy().view(np.float16).astype(np.float32)[0]


def _decode(kind: str, raw: np.ndarray):
    """(codes, scales, mins, values, (d, dmin, sc, m)) of one block's bytes."""
    if kind == "Q8_0":
        d = _f16(raw)
        codes = raw[2:34].view(np.int8).astype(np.int32)
        return codes, np.array([d]), None, (d * codes.astype(np.float32)).astype(np.float32), (d, None, None, None)
    if kind == "Q4_0":
        d = _f16(raw)
        nibbles = raw[2:18]
        codes = np.concatenate([nibbles & 0x0F, nibbles >> 4]).astype(np.int32)
        return codes, np.array([d]), None, (d * (codes - 8).astype(np.float32)).astype(np.float32), (d, None, None, None)
    if kind == "Q4_K":
        d, dmin = _f16(raw[0:2]), _f16(raw[2:4])
        s = raw[4:16]
        sc = np.concatenate([s[0:4] & 0x3F, (s[8:12] & 0x0F) | ((s[0:4] >> 2) & 0x30)]).astype(np.float32)
        mn = np.concatenate([s[4:8] & 0x3F, (s[8:12] >> 4) | ((s[4:8] >> 2) & 0x30)]).astype(np.float32)
        qs = raw[16:144].reshape(4, 32)
        codes = np.stack([qs & 0x0F, qs >> 4], axis=1).reshape(256).astype(np.int32)
        scales, mins = (d * sc).astype(np.float32), (dmin * mn).astype(np.float32)
        values = scales.repeat(32) * codes.astype(np.float32) - mins.repeat(32)
        return codes, scales, mins, values.astype(np.float32), (d, dmin, sc.astype(np.int32), mn.astype(np.int32))
    if kind == "Q6_K":
        ql, qh = raw[0:128].reshape(2, 64), raw[128:192].reshape(2, 32)
        sc = raw[192:208].view(np.int8).astype(np.float32)
        d = _f16(raw[208:210])
        low = np.stack([ql & 0x0F, ql >> 4], axis=1).reshape(2, 128)
        high = np.stack([(qh >> s) & 0x03 for s in (0, 2, 4, 6)], axis=1).reshape(2, 128)
        codes = (low | (high << 4)).reshape(256).astype(np.int32)
        scales = (d * sc).astype(np.float32)
        return (codes, scales, None, (scales.repeat(16) * (codes - 32).astype(np.float32)).astype(np.float32),
                (d, None, sc.astype(np.int32), None))
    return None


def block_of(gguf_file, name: str, row: int, block: int) -> Block:
    """Block `block` of row `row` of the stored tensor `name` (GGUF's own layout and name)."""
    if name not in gguf_file.tensors:
        raise ModelError(f"{gguf_file.path}: no tensor {name}")
    kind = gguf_file.quant_type(name)
    stored = gguf_file.stored(name)
    stored2 = stored.reshape(1, -1) if stored.ndim == 1 else stored.reshape(stored.shape[0], -1)
    if not 0 <= row < stored2.shape[0]:
        raise ModelError(f"{name}: row {row} is outside its {stored2.shape[0]} rows")
    import gguf
    block_size, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kind]]
    if kind in ("F32", "F16", "BF16"):   # no blocks: shown in runs of 32 like Q8_0's
        block_size, type_size = 32, 32 * stored2.dtype.itemsize
    n_blocks = -(-stored2.shape[1] * stored2.dtype.itemsize // type_size)
    if not 0 <= block < n_blocks:
        raise ModelError(f"{name}: block {block} is outside the row's {n_blocks} blocks")
    if kind in ("F32", "F16", "BF16"):
        whole = gguf_file.get(name) if stored.ndim == 1 else gguf_file.rows(name, slice(row, row + 1))
        values = whole.reshape(-1)[block * block_size:(block + 1) * block_size]
        return Block(kind, row, block, block_size, FORMULAS[kind], np.asarray(values, np.float32),
                     None, None, None, "not quantized: each weight is stored on its own")
    raw = np.ascontiguousarray(stored2[row].view(np.uint8)[block * type_size:(block + 1) * type_size])
    decoded = _decode(kind, raw)
    if decoded is None:
        values = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[kind]).reshape(-1).astype(np.float32)
        return Block(kind, row, block, block_size, f"{kind}: dequantized by the gguf package",
                     values, None, None, None, f"the codes of {kind} blocks are not decoded here")
    codes, scales, mins, values, (d, dmin, sc, m) = decoded
    return Block(kind, row, block, block_size, FORMULAS[kind], values, codes, scales, mins,
                 d=float(d), dmin=None if dmin is None else float(dmin), sub_scales=sc, sub_mins=m)


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
    j, q = k // block.sub_block_size, int(block.codes[k])
    kind = block.quant_type
    if kind in ("Q8_0", "Q4_0"):
        shift = " − 8" if kind == "Q4_0" else ""
        return [("d (float16 scale of the block)", block.d), (f"q[{k}] (stored code)", q),
                (f"w = d · (q{shift}) = {_g(block.d)} · ({q}{shift})", value)]
    if kind == "Q6_K":
        return [("d (float16 super-scale)", block.d), (f"sc[{j}] (int8 scale of sub-block {j})", int(block.sub_scales[j])),
                (f"d · sc[{j}]", float(block.scales[j])), (f"q[{k}] (stored 6-bit code)", q),
                (f"w = d·sc[{j}] · (q − 32) = {_g(block.scales[j])} · ({q} − 32)", value)]
    return [("d (float16 super-scale)", block.d), (f"sc[{j}] (6-bit scale of sub-block {j})", int(block.sub_scales[j])),
            (f"d · sc[{j}]", float(block.scales[j])), ("dmin (float16 super-min)", block.dmin),
            (f"m[{j}] (6-bit min of sub-block {j})", int(block.sub_mins[j])),
            (f"dmin · m[{j}]", float(block.mins[j])), (f"q[{k}] (stored 4-bit code)", q),
            (f"w = d·sc[{j}] · q − dmin·m[{j}] = {_g(block.scales[j])} · {q} − {_g(block.mins[j])}", value)]


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
