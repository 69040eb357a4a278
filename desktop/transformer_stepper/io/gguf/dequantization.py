"""What the dequantization panel shows for one block of a GGUF tensor, as plain data and text
(no Qt): the block laid out by sub-block (codes and float32 values), the sub-blocks' scales and
mins, the formula with the selected weight's numbers, and the code grid's histogram. Every
number comes from io/gguf/blocks.py; the panel only draws and prints these."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from .blocks import Block, code_histogram, formula_with_numbers
from .weights import TensorSource, block_at, tensor_sources


@dataclass(frozen=True)
class Readout:
    source: TensorSource
    block: Block
    position: int                       # the selected weight's place in the block
    values: np.ndarray                  # [n_sub_blocks, sub_block_size] float32
    codes: Optional[np.ndarray]         # same layout, int; None when the type's codes are not decoded
    grid: Optional[tuple[np.ndarray, np.ndarray]]    # (code, weights of the block using it)
    header: str                         # file, tensor, type, shape, conversion
    scales_text: str                    # d (and dmin), or why there are none
    sub_blocks: list                    # (j, sc, d·sc[, m, dmin·m]) as text, types with sub-block scales
    formula: str                        # the quant type's formula
    numbers: str                        # ... with the selected weight's numbers
    sub_headers: tuple = ()             # the sub_blocks columns' names ("j", "sc", "d·sc" ...)
    grid_labels: tuple = ()             # a label per grid code: the code, or its level (IQ4, MXFP4)
    grid_title: str = ""                # what the histogram counts

    @property
    def value(self) -> float:
        return float(self.block.values[self.position])


def _g(value) -> str:
    return f"{float(value):.6g}"


def _scales_text(block: Block) -> str:
    if block.codes is None:
        return block.note
    if block.quant_type == "MXFP4":
        e = block.kind.exponent(block.d)
        return (f"d = 2^(e − 128) = {_g(block.d)}, e = {e} (one 8-bit exponent for the block's "
                f"{block.block_size} weights)")
    if block.sub_scales is None and block.mins is not None:
        return (f"d = {_g(block.d)}, m = {_g(block.dmin)} (one float16 scale and one float16 min for "
                f"the block's {block.block_size} weights)")
    if block.sub_scales is None:
        return f"d = {_g(block.d)} (one float16 scale for the block's {block.block_size} weights)"
    return f"d = {_g(block.d)}" + (f", dmin = {_g(block.dmin)}" if block.dmin is not None else "")


def sub_block_rows(block: Block) -> list[tuple[str, ...]]:
    """Per sub-block of a block with sub-block scales: (j, sc, d·sc) and for types with mins
    (m, dmin·m); Q3_K and IQ4_XS add sc − 32 after sc. As text."""
    return block.sub_block_table()[1]


def readout(model, tensor: str, row: int, block: int, position: int = 0,
            expert: Optional[int] = None) -> Readout:
    """Block `block` of stored row `row` of GGUF tensor `tensor`, weight `position` selected; of
    a 3-D experts tensor, row `row` of expert `expert`'s slice."""
    source = tensor_sources(model)[tensor]
    decoded = block_at(model, tensor, row, block, expert)
    position = min(max(int(position), 0), decoded.block_size - 1)
    n_sub, size = decoded.n_sub_blocks, decoded.sub_block_size
    if len(decoded.values) < decoded.block_size:      # a float tensor's last, shorter run
        n_sub, size = 1, len(decoded.values)
        position = min(position, size - 1)
    values = decoded.values.reshape(n_sub, size)
    codes = None if decoded.codes is None else decoded.codes.reshape(n_sub, size)
    grid = None if decoded.codes is None else code_histogram(decoded)
    shape = " × ".join(str(n) for n in source.stored_shape)
    which = f"Expert {expert} of {source.n_experts}, row" if source.n_experts else "Row"
    header = (f"{Path(source.file).name}: {tensor} ({source.quant_type}, stored [{shape}]) → "
              f"{source.params_text()}; read {source.fix}. {which} {row}, block {block} of "
              f"{source.n_blocks()} (weights {block * decoded.block_size}–"
              f"{block * decoded.block_size + len(decoded.values) - 1} of the row)")
    labels, title = _grid_text(decoded, grid)
    return Readout(source, decoded, position, values, codes, grid, header, _scales_text(decoded),
                   sub_block_rows(decoded), decoded.formula, formula_with_numbers(decoded, position),
                   decoded.sub_block_table()[0], labels, title)


def _grid_text(block: Block, grid) -> tuple[tuple[str, ...], str]:
    """The histogram's bar labels and title: codes, or for a type whose codes index a table of
    levels (IQ4_NL, IQ4_XS, MXFP4) the level each code stands for, in code order."""
    if grid is None:
        return (), f"{block.quant_type}: no code grid"
    codes = grid[0]
    low, high = int(codes[0]), int(codes[-1])
    table = block.kind.levels_table
    if table is None:
        return tuple(str(int(c)) for c in codes), f"Code grid {low}…{high}: weights per code"
    return (tuple(str(table[int(c)]) for c in codes),
            f"Codes {low}…{high} as the levels they pick ({block.kind.level_text}): weights per code")
