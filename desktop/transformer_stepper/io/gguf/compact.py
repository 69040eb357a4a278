"""A GGUF model's weight matrices kept compact: the core parameter as a product over the stored
blocks (core/model/quantized.py), not a float32 array. The forward pass multiplies by them
(core/model/params.py linear, times_rows_transposed); views that read a weight's numbers still get
the dequantized array from the parameter store.

A core weight w [d_in, d_out] is x @ w = x @ S.T with S the stored rows in Hugging Face's
order: llama.cpp's layout is undone on the product's columns (Llama's q/k rows permuted) or
by choosing rows (GPT-2's fused c_attn read as q, k, v). A table (the output head, a tied
embedding) is multiplied as stored: x @ table.T. An expert of a mixture-of-experts layer is its
slice of the 3-D experts tensor [n_expert, out, in]: its own [out, in] blocks, a view of the
mapping (the other experts' bytes are never touched)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...core.model.quantized import QuantizedMatrix, compiled_kinds
from .model import AS_STORED, ExpertSlice, Transposed, Unpermute
from ..keymaps import IDENTITY, Columns, Transpose


@dataclass(frozen=True)
class CompactWeight:
    matrix: QuantizedMatrix                 # stored rows S [n_out, d_in]
    column_order: Optional[np.ndarray]      # stored row of each HF row (None: as stored)

    def times_transposed(self, x: np.ndarray) -> np.ndarray:
        # [..., d_in] -> [..., n_out]: x @ S.T, columns in Hugging Face's order
        flat = x.reshape(-1, x.shape[-1])
        y = self.matrix.times_transposed(flat)
        if self.column_order is not None:
            y = np.ascontiguousarray(y[:, self.column_order])
        return y.reshape(*x.shape[:-1], y.shape[-1])


    def columns(self, cols: slice) -> np.ndarray:
        # [d_in, len(cols)] of the weight S.T (columns in Hugging Face's order)
        order = self.column_order
        stored = np.arange(self.matrix.shape[0])[cols] if order is None else order[cols]
        return np.ascontiguousarray(self.matrix.dequantize(stored).T)


def _stored_codes(f, stored: str, fix) -> Optional[tuple[np.ndarray, str, int]]:
    # the stored bytes [rows, bytes a row] of a 2-D tensor, or of one expert's slice of a 3-D one
    kind, shape = f.quant_type(stored), f.shape(stored)
    expert = isinstance(fix, ExpertSlice)
    if kind not in compiled_kinds() or len(shape) != (3 if expert else 2):
        return None
    data = f.stored(stored)
    if expert:
        data = data[fix.expert]
    return data.view(np.uint8).reshape(shape[-2], -1), kind, shape[-1]


def compact_weight(ckpt, hf_name: str, transform, core_shape: tuple[int, ...],
                   table: bool) -> Optional[CompactWeight]:
    """The core parameter read from `hf_name` through `transform` as a product over its stored
    blocks: a weight [d_in, d_out] (x @ w), or with `table` a table [n_rows, d] (x @ t.T); None
    when it is not a matrix of a compiled type (float32 stays memory-mapped)."""
    f, stored, fix = ckpt.where[hf_name]
    found = _stored_codes(f, stored, fix)
    if found is None:
        return None
    codes, kind, n_cols = found

    def reference(rows: np.ndarray) -> np.ndarray:
        return f.dequantize_codes(stored, rows)

    if isinstance(fix, ExpertSlice):       # HF's [out, in] as stored: the core weight is its transpose
        as_stored = isinstance(transform, Transpose) and not table
        return CompactWeight(QuantizedMatrix(codes, kind, n_cols, reference), None) if as_stored else None

    if table:
        as_stored = transform is IDENTITY and fix is AS_STORED and core_shape == (codes.shape[0], n_cols)
        return CompactWeight(QuantizedMatrix(codes, kind, n_cols, reference), None) if as_stored else None
    if ((isinstance(transform, Transpose) and fix is AS_STORED)
            or (transform is IDENTITY and isinstance(fix, Transposed))):
        return CompactWeight(QuantizedMatrix(codes, kind, n_cols, reference), None)
    if isinstance(transform, Transpose) and isinstance(fix, Unpermute):
        order = fix(np.arange(codes.shape[0]).reshape(-1, 1)).ravel()   # HF row r = stored row order[r]
        return CompactWeight(QuantizedMatrix(codes, kind, n_cols, reference), order)
    if isinstance(transform, Columns) and isinstance(fix, Transposed):
        width = core_shape[-1]
        rows = slice(transform.index * width, (transform.index + 1) * width)
        return CompactWeight(QuantizedMatrix(codes[rows], kind, n_cols, reference), None)
    return None
