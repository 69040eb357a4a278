"""Layout transforms: a family's key map yields (core_name, checkpoint_name, transform); the
transform normalises a tensor's layout once, at load, so the core always sees weights as
[d_in, d_out]. A transform also says which shape the checkpoint tensor must have, so a
misshapen tensor is caught before it is read. (The key maps live in io/families/.)"""
from __future__ import annotations

import numpy as np


class Transform:
    """Identity: the checkpoint tensor is already in the core's layout."""

    def checkpoint_shape(self, core_shape: tuple[int, ...]) -> tuple[int, ...]:
        return core_shape

    def __call__(self, w: np.ndarray) -> np.ndarray:
        return w


class Transpose(Transform):
    """nn.Linear stores [out, in]; the core wants [in, out]: a transposed view, no copy (a
    float32 weight stays memory-mapped; a widened one is not copied twice). OpenBLAS multiplies
    by the view as fast as by a C-order copy (measured on this project's machines: [128, 2048]
    x [2048, 8192] 28.6 vs 28.9 ms; [16, 384] x [384, 1536] 0.25 vs 0.27 ms), while copying
    cost 160 ms per 16 M-element matrix when opening a 1B model."""

    def checkpoint_shape(self, core_shape):
        return core_shape[::-1]

    def __call__(self, w):
        return w.T


class Columns(Transform):
    """Part `index` of `parts` equal blocks along the last axis: GPT-2's fused c_attn is
    [d_in, 3*d_model] with q|k|v side by side. Returns a view."""

    def __init__(self, index: int, parts: int) -> None:
        self.index, self.parts = index, parts

    def checkpoint_shape(self, core_shape):
        return core_shape[:-1] + (core_shape[-1] * self.parts,)

    def __call__(self, w):
        width = w.shape[-1] // self.parts
        return w[..., self.index * width:(self.index + 1) * width]


class ExpertPart(Transform):
    """Expert `expert`'s slice of a fused [n_expert, ...] tensor (gpt-oss stores a layer's experts
    as one 3-D tensor, [in, out] each); with `parts` > 1, every parts-th column from `index`
    (gpt-oss's gate_up_proj interleaves them: gate the even columns, up the odd ones)."""

    def __init__(self, expert: int, n_expert: int, index: int = 0, parts: int = 1) -> None:
        self.expert, self.n_expert, self.index, self.parts = expert, n_expert, index, parts

    def checkpoint_shape(self, core_shape):
        return (self.n_expert,) + core_shape[:-1] + (core_shape[-1] * self.parts,)

    def __call__(self, w):
        value = w[self.expert]
        return value if self.parts == 1 else np.ascontiguousarray(value[..., self.index::self.parts])


IDENTITY, TRANSPOSE = Transform(), Transpose()
KeyMap = list[tuple[str, str, Transform]]
