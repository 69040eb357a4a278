"""The words of a text that fell outside the model's vocabulary: a WordPiece or word-level
tokenizer turns each into its unknown token ([UNK]), and the model then sees one and the same
vector for all of them. Which positions, and the words of the text they stand for."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace.trace import Trace


@dataclass(frozen=True)
class UnknownWords:
    mask: np.ndarray             # [n_seq] bool: the position is the unknown token
    words: tuple[str, ...]       # the text each such position stands for (its offsets)

    @property
    def count(self) -> int:
        return int(self.mask.sum())


def unknown_words(trace: Trace, unknown_id) -> UnknownWords:
    """The positions of `trace` that are the unknown token `unknown_id` (None: there is none)."""
    if unknown_id is None:
        return UnknownWords(np.zeros(trace.n_seq, bool), ())
    mask = (np.asarray(trace.input_ids) == int(unknown_id)) & ~np.asarray(trace.special_tokens_mask, bool)
    offsets = np.asarray(trace.offsets)
    words = tuple(trace.text[int(offsets[i][0]):int(offsets[i][1])] for i in np.flatnonzero(mask))
    return UnknownWords(mask, words)
