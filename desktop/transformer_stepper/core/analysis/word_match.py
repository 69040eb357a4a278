"""Finding a word in a traced sentence, on the tokenizer's pieces: 'bank' is `bank`, `Ġbank`
(byte-level BPE), `▁bank` (SentencePiece), never the `##bank` of 'riverbank' nor the start of
'banks'. A word of several pieces is found as its first piece, with a note saying so."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..model.errors import ModelError
from ..model.tokenize import Tokenizer

_SPACE_MARKS = ("Ġ", "▁")      # byte-level BPE and SentencePiece mark a leading space
_CONTINUATION = "##"           # WordPiece marks a piece inside a word
_UNKNOWN = ("[UNK]", "<unk>", "<UNK>")


def piece_text(piece: str) -> str:
    """A piece without its tokenizer's space or continuation mark: 'Ġbank', '▁bank', '##bank'
    and 'bank' all read 'bank'."""
    for mark in _SPACE_MARKS:
        if piece.startswith(mark) and len(piece) > len(mark):
            return piece[len(mark):]
    if piece.startswith(_CONTINUATION) and len(piece) > len(_CONTINUATION):
        return piece[len(_CONTINUATION):]
    return piece


def _folded(text: str) -> str:
    # case and accents do not count (an uncased WordPiece strips both)
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def word_spellings(tokenizer: Tokenizer, word: str, max_length: int) -> list[tuple[str, ...]]:
    """How the tokenizer writes `word` as pieces (marks removed): alone, and after a space, which
    byte-level and SentencePiece tokenizers spell differently. Empty if the word has no pieces;
    ModelError if the tokenizer only knows it as the unknown token."""
    spellings: list[tuple[str, ...]] = []
    for text in (word, " " + word):
        encoded = tokenizer.encode(text, max_length=max_length)
        pieces = tuple(p for p, special in zip(encoded.tokens, encoded.special_tokens_mask)
                       if not special)
        if any(p in _UNKNOWN for p in pieces) and word not in _UNKNOWN:
            raise ModelError(f"'{word}' is not in the model's vocabulary "
                             f"(the tokenizer writes it as {' '.join(pieces)})")
        spelling = tuple(piece_text(p) for p in pieces if piece_text(p).strip())
        if spelling and spelling not in spellings:
            spellings.append(spelling)
    return spellings


@dataclass(frozen=True)
class Pick:
    """The token compared in one sentence: its position, or a problem saying why none."""
    position: Optional[int]
    note: str = ""          # e.g. the word is several pieces and the first is compared
    problem: str = ""


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _spans(offsets: np.ndarray, text: str) -> list[tuple[int, int]]:
    # each token's characters, without the leading space byte-level offsets may include
    spans = []
    for start, end in np.asarray(offsets).reshape(-1, 2).tolist():
        while start < end and start < len(text) and text[start].isspace():
            start += 1
        spans.append((start, end))
    return spans


def _whole_word(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if 0 < start <= len(text) else " "
    after = text[end] if 0 <= end < len(text) else " "
    return not (_is_word_char(before) or _is_word_char(after))


def _picked(tokens: Sequence[str], i: int, n: int, word: str) -> Pick:
    if n == 1:
        return Pick(i)
    return Pick(i, f"'{word}' is {n} pieces here ({' '.join(tokens[i:i + n])}): the first, "
                   f"'{tokens[i]}', is compared")


def find_word(tokens: Sequence[str], special: Sequence[bool], offsets: np.ndarray, text: str,
              spellings: Sequence[tuple[str, ...]], word: str) -> Pick:
    """The first place where the word stands as a whole word ('bank' is not the '##bank' of
    'riverbank', nor the start of 'banks'), matched on the tokenizer's pieces: exactly, then
    ignoring case and accents. Failing that (a text the tokenizer splits differently, 'The' as
    T h e), the word found in the text, case ignored, and the pieces that cover it."""
    texts = [piece_text(t) for t in tokens]
    spans = _spans(offsets, text)

    def stretch(i: int, n: int) -> Optional[tuple[int, int]]:
        # the characters of pieces i..i+n-1 if they are one stretch of text
        if any(spans[j][1] != spans[j + 1][0] for j in range(i, i + n - 1)):
            return None
        return spans[i][0], spans[i + n - 1][1]

    for fold in (lambda s: s, _folded):
        for spelling in spellings:
            want = [fold(p) for p in spelling]
            n = len(want)
            for i in range(len(texts) - n + 1):
                if any(special[i:i + n]) or [fold(t) for t in texts[i:i + n]] != want:
                    continue
                where = stretch(i, n)
                if where is not None and _whole_word(text, *where):
                    return _picked(tokens, i, n, word)
    for match in re.finditer(r"(?<!\w)" + re.escape(word) + r"(?!\w)", text, re.IGNORECASE):
        covering = [i for i, (start, end) in enumerate(spans)
                    if not special[i] and start < match.end() and end > match.start()]
        if covering:
            return _picked(tokens, covering[0], len(covering), word)
        last_end = max((end for (start, end), sp in zip(spans, special) if not sp and end > start), default=0)
        if match.start() >= last_end:
            # the tokenizer cut the text at the model's context: the word is past the cut
            return Pick(None, problem=f"'{word}' is past the model's context ({len(tokens)} tokens): "
                                      f"truncated away")
    return Pick(None, problem=f"no '{word}' in it")
