"""Open a .gguf as a Model: the family's GGUF layout (io/families, GGUF_LAYOUTS) turns llama.cpp's
metadata into the config.json fields Hugging Face's GGUF loader derives and names the tensors as
Hugging Face does, then the same family config, key map and lazy parameter store as an HF
folder. Nothing here depends on the architecture."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from ...core.model.errors import ModelError
from ...core.model.params import expected_shapes
from ...core.trace.model import Model
from .. import families
from ..checkpoint_params import CheckpointParams
from ..families.gguf_layout import GGUFLayout
from .compact import CompactWeight, compact_weight
from .file import GGUFFile
from .model import GGUFCheckpoint, layout_of, map_tensors, open_files
from .tokenizer import tokenizer_from_gguf
from .weights import weight_steps
from ..keymaps import IDENTITY

def _check_vocab(files: list[GGUFFile], ckpt: GGUFCheckpoint, embed: str, n_vocab: int) -> None:
    if embed not in ckpt.where:
        raise ModelError(f"{files[0].path}: no token_embd.weight tensor (a GGUF of a language model "
                         f"has one)")
    rows = ckpt.shape(embed)[0]
    if rows != n_vocab:
        raise ModelError(f"{ckpt.file_of(embed)}: the vocabulary has {n_vocab} tokens but "
                         f"token_embd.weight has {rows} rows")


class GGUFParams(CheckpointParams):
    """A GGUF model's parameters: they also say how a weight's stored block gives it (the
    provenance of a weight, core/analysis/provenance/params.py), and the forward pass multiplies by
    its matrices straight from the stored blocks (io/gguf/compact.py): the float32 matrices
    of an 8B model (32 GB) are never made, and nothing is dequantized again for each pass."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._compact: dict[tuple[str, bool], Optional[CompactWeight]] = {}

    def weight_steps(self, name: str, index):
        return weight_steps(self, name, index)

    def compact(self, name: str, table: bool = False) -> Optional[CompactWeight]:
        key = (name, table)
        if key not in self._compact:
            ckpt_name, transform = self.entries[name]
            self._compact[key] = compact_weight(self.ckpt, ckpt_name, transform, self.shapes[name], table)
        return self._compact[key]

    def product(self, name: str, x: np.ndarray, table: bool = False) -> Optional[np.ndarray]:
        """x @ self[name] (a weight [d_in, d_out]) from the stored blocks; None if not compact."""
        weight = self.compact(name, table)
        if weight is None:
            return None
        self.ckpt.check_unchanged(self.entries[name][0])
        return weight.times_transposed(x)

    def columns(self, name: str, cols: slice) -> Optional[np.ndarray]:
        """self[name][:, cols] of a weight [d_in, d_out], dequantizing only the stored rows that
        hold those columns (the QKV view's head, on the GUI thread); None if not compact."""
        weight = self.compact(name)
        if weight is None:
            return None
        self.ckpt.check_unchanged(self.entries[name][0])
        return weight.columns(cols)

    def product_transposed(self, name: str, x: np.ndarray) -> Optional[np.ndarray]:
        """x @ self[name].T (a table [n_rows, d]: the output head) from the stored blocks."""
        return self.product(name, x, table=True)


def _params(ckpt: GGUFCheckpoint, config, layout: GGUFLayout) -> CheckpointParams:
    keymap = list(families.of_config(config).keymap(config, ckpt.names()))
    if layout.separate_head and config.lm_head and not config.tied_head:
        keymap.append(("lm_head.w", "lm_head.weight", IDENTITY))
    shapes = expected_shapes(config)
    entries = {}
    for core_name, full, transform in keymap:
        if full not in ckpt.where:
            raise ModelError(f"{ckpt.source}: missing tensor for {full} (GGUF name expected "
                             f"like blk.N.* / token_embd / output_norm)")
        expected = transform.checkpoint_shape(shapes[core_name])
        actual = ckpt.shape(full)
        if actual != expected:
            raise ModelError(f"{ckpt.file_of(full)}: tensor {ckpt.stored_name(full)} has shape "
                             f"{actual}, expected {expected}")
        ckpt.check_readable(full)
        entries[core_name] = (full, transform)
    return GGUFParams(ckpt, entries, {name: shapes[name] for name in entries})


def load_gguf(path: Path) -> Model:
    files = open_files(path)
    _, layout = layout_of(files[0])
    arch = layout.architecture
    cfg = layout.config(files, arch)
    n_kv = cfg.get("num_key_value_heads", cfg.get("n_head"))
    n_head = cfg.get("num_attention_heads", cfg.get("n_head"))
    ckpt = GGUFCheckpoint(files, map_tensors(files, layout, n_head, n_kv), str(path))
    _check_vocab(files, ckpt, layout.embedding, cfg["vocab_size"])
    warnings: list[str] = []
    config = families.by_model_type(cfg["model_type"], str(path)).config_from_hf(cfg, str(path), ckpt.names(),
                                                                               warnings)
    if layout.separate_head:  # llama.cpp writes the head as its own output.weight (quantized apart)
        warnings.clear()
        config = config.replace(lm_head=True, tied_head="lm_head.weight" not in ckpt.where)
    name = files[0].value("general.name") or path.name.split(".gguf")[0]
    config = config.replace(name=str(name))
    params = _params(ckpt, config, layout)
    tokenizer = tokenizer_from_gguf(files[0], layout.sentencepiece)
    model = Model(config, params, tokenizer, source=str(path))
    model.warnings = warnings
    return model
