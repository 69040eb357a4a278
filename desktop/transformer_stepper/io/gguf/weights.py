"""Where each weight of a GGUF model is stored: the file, the tensor, its quant type, and for one
weight of a core parameter the stored row, block and place in the block. What the
dequantization panel lists and what a weight's provenance decodes (io/gguf/blocks.py does the
block's arithmetic). No Qt.

A core parameter reaches the forward pass through two layout steps, both undone here for an
index: the family's key map (core [d_in, d_out] <- Hugging Face's [out, in], or a part of
GPT-2's fused c_attn) and llama.cpp's conversion (io/gguf/model.py: Llama q/k rows permuted,
GPT-2's Conv1D transposed, Gemma's norms stored 1 + w)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...core.model.errors import ModelError
from ...core.model.quant_types import QUANT_TYPES
from .blocks import Block, arithmetic, block_of
from .model import ExpertSlice, GGUFCheckpoint, MinusOne, Transposed, Unpermute
from ..families.common import AddOne
from ..keymaps import Columns, Transform, Transpose


@dataclass(frozen=True)
class TensorSource:
    """One stored GGUF tensor and the core parameters read from it."""
    tensor: str                     # GGUF name ("blk.0.attn_q.weight")
    file: str
    quant_type: str                 # "Q4_K", "Q6_K", "F32" ...
    stored_shape: tuple[int, ...]   # numpy order: (rows, weights per row)
    hf_name: str                    # the Hugging Face name it maps to
    fix: str                        # llama.cpp's conversion undone on read ("as stored" ...)
    params: tuple[str, ...]         # core names ("h.0.attn.q.w")

    @property
    def n_rows(self) -> int:
        """Stored rows (of each expert, for a 3-D experts tensor)."""
        return self.stored_shape[-2] if len(self.stored_shape) > 1 else 1

    @property
    def n_experts(self) -> int:
        """Experts of a 3-D experts tensor [n_expert, rows, in]; 0 for other tensors."""
        return self.stored_shape[0] if len(self.stored_shape) == 3 else 0

    def params_text(self) -> str:
        """The core parameters read from it ("h.0.moe.expert.{e}.gate.w" for a 3-D experts tensor)."""
        if not self.n_experts:
            return ", ".join(self.params)
        first = self.params[0].split(".")
        return ".".join(first[:4] + ["{e}"] + first[5:]) + f" (e = 0 … {self.n_experts - 1})"

    @property
    def row_length(self) -> int:
        return self.stored_shape[-1]

    def n_blocks(self) -> int:
        """Blocks per row (float tensors are shown in runs of 32, as io/gguf_blocks does)."""
        return -(-self.row_length // block_size_of(self.quant_type))


def block_size_of(quant_type: str) -> int:
    """Weights per block of a GGUF quant type (float types: runs of 32)."""
    if quant_type in ("F32", "F16", "BF16", "F64"):
        return 32
    import gguf
    return gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[quant_type]][0]


def checkpoint_of(model) -> Optional[GGUFCheckpoint]:
    """The GGUF checkpoint a model reads its weights from, or None (not a GGUF model)."""
    ckpt = getattr(getattr(model, "params", None), "ckpt", None)
    return ckpt if isinstance(ckpt, GGUFCheckpoint) else None


def is_gguf(model) -> bool:
    return checkpoint_of(model) is not None


def why_not_gguf(model) -> str:
    """'' for a GGUF model, else why there is no dequantization to show."""
    if model is None:
        return "no model is open"
    if not is_gguf(model):
        return (f"{model.config.name or 'this model'} is not a GGUF file: its weights are stored "
                f"as plain floats, with no quantization blocks to decode")
    return ""


def _require(model) -> GGUFCheckpoint:
    ckpt = checkpoint_of(model)
    if ckpt is None:
        raise ModelError(why_not_gguf(model))
    return ckpt


def tensor_sources(model) -> dict[str, TensorSource]:
    """Every stored tensor the model reads, by GGUF name, in the key map's order (made once per
    parameter store: a 48-layer mixture of experts has 18,432 expert parameters to group)."""
    ckpt = _require(model)
    cached = getattr(model.params, "_tensor_sources", None)
    if cached is not None:
        return cached
    groups: dict[str, tuple] = {}           # stored name -> (file, HF name, fix, core names)
    for core_name, (hf_name, _) in model.params.entries.items():
        f, stored, fix = ckpt.where[hf_name]
        if stored in groups:                 # a 3-D experts tensor: every expert's parameters, or
            groups[stored][3].append(core_name)     # GPT-2's fused c_attn: q, k and v
        else:
            groups[stored] = (f, hf_name, _EXPERTS if isinstance(fix, ExpertSlice) else fix, [core_name])
    out = {stored: TensorSource(stored, str(f.path), f.quant_type(stored), f.shape(stored), hf_name, fix.name,
                                tuple(params))
           for stored, (f, hf_name, fix, params) in groups.items()}
    try:
        model.params._tensor_sources = out
    except AttributeError:      # a store that takes no attribute: made again each time
        pass
    return out


class _ExpertsFix:
    name = "each expert as its own slice [out, in] of the 3-D tensor"


_EXPERTS = _ExpertsFix()


def layer_tensors(model, layer: int) -> list[TensorSource]:
    """The stored tensors of layer `layer` (blk.N.*: its 3-D experts tensors too, read an expert
    at a time), then token_embd and output (if stored)."""
    sources = tensor_sources(model)
    mine = [s for name, s in sources.items() if name.startswith(f"blk.{layer}.")]
    return mine + [sources[n] for n in ("token_embd.weight", "output.weight") if n in sources]


def source_of_param(model, param: str) -> TensorSource:
    for source in tensor_sources(model).values():
        if param in source.params:
            return source
    raise ModelError(f"{param}: not a parameter read from this GGUF")


def _hf_index(transform: Transform, core_shape: tuple[int, ...], index: tuple[int, ...]) -> tuple[int, ...]:
    if isinstance(transform, Transpose):
        return tuple(reversed(index))
    if isinstance(transform, Columns):
        return (*index[:-1], index[-1] + transform.index * core_shape[-1])
    if type(transform) not in (Transform, AddOne):
        raise ModelError(f"no index map for the layout transform {type(transform).__name__}")
    return index


def _stored_index(fix, index: tuple[int, ...], hf_rows: int) -> tuple[int, ...]:
    if isinstance(fix, Transposed):
        return tuple(reversed(index))
    if isinstance(fix, Unpermute):
        return (fix.stored_row(index[0], hf_rows), *index[1:])
    return index


@dataclass(frozen=True)
class WeightPlace:
    source: TensorSource
    row: int            # stored row (of the expert's slice, for a 3-D experts tensor)
    column: int         # place in the stored row
    block: int          # block of the row
    position: int       # place in the block
    fix: object         # the Fix undone on read (a value step for Gemma's norms)
    expert: Optional[int] = None    # the expert, for a weight of a 3-D experts tensor


def place_of(model, param: str, index) -> WeightPlace:
    """Where the core weight `param[index]` is stored."""
    ckpt = _require(model)
    index = tuple(int(k) for k in index)
    shape = model.params.shape(param)
    if len(index) != len(shape) or any(not 0 <= k < n for k, n in zip(index, shape)):
        raise IndexError(f"{param}: index {index} is outside the shape {tuple(shape)}")
    hf_name, transform = model.params.entries[param]
    fix = ckpt.fix_of(hf_name)
    stored = _stored_index(fix, _hf_index(transform, shape, index), ckpt.shape(hf_name)[0])
    source = tensor_sources(model)[ckpt.stored_name(hf_name)]
    row, column = (0, stored[0]) if len(stored) == 1 else stored
    size = -(-source.row_length // source.n_blocks())
    expert = fix.expert if isinstance(fix, ExpertSlice) else None     # its slice holds HF's [out, in] as stored
    return WeightPlace(source, row, column, column // size, column % size, fix, expert)


def block_at(model, tensor: str, row: int, block: int, expert: Optional[int] = None) -> Block:
    """Block `block` of stored row `row` of the GGUF tensor `tensor` (of expert `expert`'s slice,
    for a 3-D experts tensor), decoded."""
    ckpt = _require(model)
    for f in ckpt.files:
        if tensor in f.tensors:
            return block_of(f, tensor, row, block, expert)
    raise ModelError(f"{ckpt.source}: no tensor {tensor}")


def weight_arithmetic(model, param: str, index) -> tuple[WeightPlace, Block, list[tuple[str, float]]]:
    """The stored numbers and the steps that give the core weight `param[index]`: the block's
    decoding (io/gguf_blocks.arithmetic), then llama.cpp's value conversion undone (Gemma's
    norms: − 1). The last step's value equals model.params[param][index]."""
    place = place_of(model, param, index)
    block = block_at(model, place.source.tensor, place.row, place.block, place.expert)
    steps = arithmetic(block, place.position)
    if isinstance(place.fix, MinusOne):
        steps.append(("− 1 (llama.cpp stores Gemma's norm gain as 1 + w)",
                      float(np.float32(steps[-1][1]) - np.float32(1.0))))
    if isinstance(model.params.entries[param][1], AddOne):
        steps.append(("+ 1 (Gemma's gain 1 + w, computed once at load)",
                      float(np.float32(1.0) + np.float32(steps[-1][1]))))
    return place, block, steps


class _Store:
    """What the functions above read of a model: its parameter store."""

    def __init__(self, params) -> None:
        self.params = params


def weight_steps(params, param: str, index):
    """core.analysis.provenance.params.WeightSteps of a GGUF weight (its provenance's arithmetic)."""
    from ...core.analysis.provenance.params import WeightSteps
    place, block, steps = weight_arithmetic(_Store(params), param, index)
    source = place.source
    expert = "" if place.expert is None else f"expert {place.expert}, "
    where = (f"{Path(source.file).name}: {source.tensor} ({source.quant_type}), {expert}row {place.row}, "
             f"block {place.block}, weight {place.position} of {block.block_size}")
    python = _python(params, param, tuple(int(k) for k in index), block.quant_type, place.fix)
    notes = [f"stored in {source.file}"]
    if source.fix != "as stored":
        notes.append(f"llama.cpp's layout undone on read: {source.fix}")
    if block.note:
        notes.append(block.note)
    return WeightSteps(where, block.formula, tuple(steps), python, tuple(notes))


def _python(params, param: str, index: tuple, kind: str, fix) -> str:
    """Lines that recompute the weight from the block's stored numbers (float32, as decoded)."""
    lines = ["import numpy as np",
             "from transformer_stepper.io.gguf.weights import block_at, place_of",
             f"place = place_of(model, {param!r}, {index})",
             "block = block_at(model, place.source.tensor, place.row, place.block, place.expert)"]
    if kind in QUANT_TYPES:    # scale · level(q) [− min], as core/model/quant_types computes it
        kind_class = QUANT_TYPES[kind]
        mins = (" + block.mins[j]" if kind_class.min_plus else " - block.mins[j]") if kind_class.has_mins else ""
        lines += ["from transformer_stepper.core.model.quant_types import quant_type",
                  "k = place.position; j = k // block.sub_block_size",
                  f"level = quant_type({kind!r}).levels(np.array([block.codes[k]]))[0]   "
                  f"# {QUANT_TYPES[kind].level_text} as float32",
                  f"value = block.scales[j] * level{mins}"]
    else:
        lines.append("value = block.values[place.position]")
    if isinstance(fix, MinusOne):
        lines.append("value = value - np.float32(1)")
    if isinstance(params.entries[param][1], AddOne):
        lines.append("value = np.float32(1) + value")
    return "\n".join(lines) + "\n"
