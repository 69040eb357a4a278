"""Opening an encoder–decoder checkpoint (T5, BART, Marian): the family's Seq2SeqConfig and key
map, every tensor shape-checked at open and read on use, as io/loader.py does for one stack.
Tables a family computes rather than stores (Marian's sinusoids) join as `computed` arrays."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..core.model.errors import ModelError
from ..core.model.params import ParamStore
from ..core.model.seq2seq import Seq2SeqConfig, expected_seq2seq_shapes
from ..core.trace.seq2seq_model import Seq2SeqModel
from ..core.model.tokenize import Tokenizer
from . import families
from .checkpoint_params import CheckpointParams


class WithComputed(ParamStore):
    """A checkpoint's parameters plus arrays computed at open (same names, read-only)."""

    def __init__(self, stored: CheckpointParams, computed: dict[str, np.ndarray]) -> None:
        self.stored, self.computed = stored, computed
        for value in computed.values():
            value.flags.writeable = False

    def __getitem__(self, name: str) -> np.ndarray:
        return self.computed[name] if name in self.computed else self.stored[name]

    def __iter__(self) -> Iterator[str]:
        yield from self.stored
        yield from self.computed

    def __len__(self) -> int:
        return len(self.stored) + len(self.computed)

    def __contains__(self, name) -> bool:
        return name in self.computed or name in self.stored

    def shape(self, name: str) -> tuple[int, ...]:
        return self.computed[name].shape if name in self.computed else self.stored.shape(name)

    def rows(self, name: str, index) -> np.ndarray:
        return self.computed[name][index] if name in self.computed else self.stored.rows(name, index)

    def row_blocks(self, name: str, block_rows: int = 8192):
        if name in self.computed:
            return super().row_blocks(name, block_rows)
        return self.stored.row_blocks(name, block_rows)


def is_seq2seq_path(path) -> bool:
    """Does `path` (a folder, or a file in one) hold an encoder–decoder, by its config.json's
    model_type? (Read before opening, to choose the window; False when it cannot tell.)"""
    import json

    folder = Path(path)
    folder = folder if folder.is_dir() else folder.parent
    try:
        model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return False
    return any(model_type in f.model_types for f in families.FAMILIES if f.seq2seq)


def _decoder_missing(ckpt, keymap) -> Optional[str]:
    decoder = [full for core, full, _ in keymap if core.startswith("decoder.")]
    if decoder and not any(full in ckpt.where for full in decoder):
        return decoder[0]
    return None


def map_params(ckpt, config: Seq2SeqConfig) -> ParamStore:
    family = families.of_config(config)
    keymap = family.keymap(config, ckpt.names())
    missing = _decoder_missing(ckpt, keymap)
    if missing:
        raise ModelError(f"{ckpt.source}: the config describes an encoder–decoder but the file has "
                         f"no decoder weights (no {missing})")
    shapes = expected_seq2seq_shapes(config)
    computed = family.computed_params(config) if family.computed_params else {}
    entries = {}
    for core_name, full, transform in keymap:
        if full not in ckpt.where:
            raise ModelError(f"{ckpt.source}: missing tensor {full}")
        expected = transform.checkpoint_shape(shapes[core_name])
        actual = ckpt.shape(full)
        if actual != expected:
            raise ModelError(f"{ckpt.file_of(full)}: tensor {full} has shape {actual}, expected {expected}")
        ckpt.check_readable(full)
        entries[core_name] = (full, transform)
    unmapped = sorted(set(shapes) - set(entries) - set(computed))
    if unmapped:
        raise ModelError(f"{ckpt.source}: no tensor for {unmapped[0]}")
    stored = CheckpointParams(ckpt, entries, {n: shapes[n] for n in entries})
    return WithComputed(stored, computed) if computed else stored


def tokenizers(folder: Path, find) -> tuple[Tokenizer, Optional[Tokenizer]]:
    """(source tokenizer, target tokenizer or None: the same). tokenizer.json when the folder
    has one (`find` reads it); else a downloaded OPUS-MT folder's source.spm, target.spm and
    vocab.json, or a T5 folder's spiece.model (io/sentencepiece_tokenizer.py)."""
    from . import sentencepiece_tokenizer as spm

    if not (folder / "tokenizer.json").exists():
        if spm.has_marian_files(folder):
            return spm.marian_tokenizers(folder)
        if (folder / "spiece.model").is_file():
            return spm.t5_tokenizer(folder), None
    return find(folder), None


def load(ckpt, folder: Path, config: Seq2SeqConfig, warnings: list[str], tokenizer: Tokenizer,
         target_tokenizer: Optional[Tokenizer] = None) -> Seq2SeqModel:
    model = Seq2SeqModel(config, map_params(ckpt, config), tokenizer, source=ckpt.source,
                         target_tokenizer=target_tokenizer)
    model.warnings = warnings
    return model
