"""A thin wrapper over the `tokenizers` library: the exact ids Hugging Face gives."""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
from tokenizers import Tokenizer as _HFTokenizer

from .errors import ModelError

# Lone surrogates (from undecodable bytes on a command line, say) cannot cross into Rust;
# each becomes U+FFFD, one character for one, so offsets still index the original text.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _RustPanicsQuiet:
    """While a Rust call runs, file descriptor 2 goes to a scratch file: a panic inside the
    library (a pre-tokenizer regex hitting Oniguruma's retry limit) prints its message and a
    backtrace there, not on the user's terminal; the call's exception becomes one ModelError
    line. Anything else written meanwhile is copied back to stderr afterwards. One redirection
    at a time (a process-wide lock): descriptors are per process, not per thread."""

    _lock = threading.Lock()
    _scratch = None

    def __enter__(self):
        self._lock.acquire()
        try:
            import sys
            import tempfile
            if _RustPanicsQuiet._scratch is None:   # a bare descriptor, unlinked at once
                fd, name = tempfile.mkstemp(prefix="ts-stderr-")
                os.unlink(name)
                _RustPanicsQuiet._scratch = fd
            sys.stderr.flush()
            self._saved = os.dup(2)
            os.dup2(_RustPanicsQuiet._scratch, 2)
        except (OSError, ValueError, AttributeError):
            self._saved = None
        return self

    def __exit__(self, kind, value, traceback) -> None:
        try:
            if self._saved is not None:
                os.dup2(self._saved, 2)
                os.close(self._saved)
                scratch = _RustPanicsQuiet._scratch
                size = os.lseek(scratch, 0, os.SEEK_CUR)
                written = os.pread(scratch, size, 0) if size else b""
                if size:
                    os.ftruncate(scratch, 0)
                    os.lseek(scratch, 0, os.SEEK_SET)
                if written and b"panicked at" not in written:
                    os.write(2, written)
        finally:
            self._lock.release()


def _is_interrupt(exc: BaseException) -> bool:
    return isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit))


@dataclass(frozen=True)
class Encoded:
    tokens: tuple[str, ...]
    input_ids: np.ndarray          # [n_seq] int64
    token_type_ids: np.ndarray     # [n_seq] int64
    offsets: np.ndarray            # [n_seq, 2] int64
    special_tokens_mask: np.ndarray  # [n_seq] bool
    truncated: bool


class Tokenizer:
    def __init__(self, hf_tokenizer: _HFTokenizer, source: str) -> None:
        self._tok = hf_tokenizer
        self.source = source
        self._tok.no_padding()
        # enable_truncation mutates the Rust tokenizer, which raises "Already borrowed" if
        # another thread is encoding: set it only when it changes, under a lock
        self._lock = threading.Lock()
        self._max_length: int | None = None

    # The library raises a bare Exception on bad JSON, and a Rust panic surfaces as
    # pyo3's PanicException, a BaseException: both become a ModelError naming the file.
    @classmethod
    def from_file(cls, path: str | Path) -> "Tokenizer":
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"{path}: tokenizer file not found")
        try:
            with _RustPanicsQuiet():
                return cls(_HFTokenizer.from_file(str(path)), str(path))
        except BaseException as exc:
            if _is_interrupt(exc):
                raise
            raise ModelError(f"{path}: not a valid tokenizer.json ({_reason(exc)})") from None

    @classmethod
    def from_json(cls, text: str, source: str) -> "Tokenizer":
        try:
            return cls(_HFTokenizer.from_str(text), source)
        except BaseException as exc:
            if _is_interrupt(exc):
                raise
            raise ModelError(f"{source}: not a valid tokenizer ({_reason(exc)})") from None

    def to_json(self) -> str:
        return self._tok.to_str()

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def max_id(self) -> int:
        """The largest id the tokenizer can produce; -1 for an empty vocabulary."""
        return max(self._tok.get_vocab(with_added_tokens=True).values(), default=-1)

    @property
    def unknown_id(self) -> Optional[int]:
        """The id a word outside the vocabulary becomes ([UNK]), or None: byte-level BPE has no
        unknown words."""
        token = getattr(self._tok.model, "unk_token", None)
        return self._tok.token_to_id(token) if token else None

    def vocabulary(self) -> list[tuple[int, str]]:
        """(id, piece) of every entry, by id."""
        return sorted((i, piece) for piece, i in self._tok.get_vocab(with_added_tokens=True).items())

    def id_to_token(self, token_id: int) -> str:
        token = self._tok.id_to_token(int(token_id))
        return token if token is not None else f"<{token_id}>"

    def token_to_id(self, token: str) -> Optional[int]:
        """The id of a piece of the vocabulary (special tokens included), or None."""
        return self._tok.token_to_id(token)

    def decode_piece(self, token_id: int) -> str:
        """How the token reads as text (GPT-2's byte-level 'Ġ' becomes a space)."""
        return self._tok.decode([int(token_id)], skip_special_tokens=False)

    def continuation(self, prefix_ids, new_ids) -> list[str]:
        """How each of new_ids reads when appended after prefix_ids: the growth of the decoded
        text, so a word-level tokenizer's spaces and a byte-level one's merged bytes come out
        as the tokenizer's decoder writes them."""
        ids = [int(i) for i in prefix_ids]
        pieces = []
        before = self._tok.decode(ids, skip_special_tokens=True)
        for token in new_ids:
            ids.append(int(token))
            after = self._tok.decode(ids, skip_special_tokens=True)
            piece = after[len(before):] if after.startswith(before) else self.decode_piece(token)
            pieces.append(piece)
            before = after
        return pieces

    def encode(self, text: str, max_length: int) -> Encoded:
        if not isinstance(text, str):
            raise ModelError(f"text must be a string, got {type(text).__name__}")
        if not text.strip():
            raise ModelError("empty text: type a sentence to trace")
        try:
            with self._lock:
                if self._max_length != max_length:
                    self._tok.enable_truncation(max_length=max_length)
                    self._max_length = max_length
                with _RustPanicsQuiet():
                    encoding = self._tok.encode(_SURROGATE.sub("\ufffd", text))
        except BaseException as exc:
            if _is_interrupt(exc):
                raise
            raise ModelError(f"{self.source}: could not tokenize the text ({_reason(exc)})") from None
        if not encoding.ids:
            raise ModelError(f"{self.source}: the text produced no tokens")
        return Encoded(
            tokens=tuple(encoding.tokens),
            input_ids=np.asarray(encoding.ids, dtype=np.int64),
            token_type_ids=np.asarray(encoding.type_ids, dtype=np.int64),
            offsets=np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2),
            special_tokens_mask=np.asarray(encoding.special_tokens_mask, dtype=bool),
            truncated=bool(encoding.overflowing),
        )
