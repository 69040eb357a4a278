"""Tokenizers built from SentencePiece models, for folders without a tokenizer.json: a T5 folder
with only spiece.model, and a downloaded OPUS-MT (Marian) folder with source.spm, target.spm
and vocab.json. The .spm file is read as data (io/sentencepiece_model.py) into the `tokenizers`
library's Unigram model with SentencePiece's own normalizer rules (the precompiled character
map, extra whitespace removed, spaces as '▁', the dummy prefix), so ids equal
SentencePieceProcessor.encode's, and the special tokens split out first as transformers'
tokenizers do.

T5 (T5Tokenizer): the model's piece ids, then `extra_ids` sentinels <extra_id_99> … <extra_id_0>
after them, '</s>' appended.
Marian (MarianTokenizer): the source text is cut into pieces by source.spm, the target by
target.spm, and either's pieces are looked up in the one vocab.json (a piece it lacks is
<unk>); '</s>' appended; a leading language code '>>xx<<' is a token of its own."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from ..core.model.errors import ModelError
from ..core.model.tokenize import Encoded, Tokenizer
from .sentencepiece_model import BYTE, SentencePieceModel, read

MARIAN_FILES = ("source.spm", "target.spm", "vocab.json")


def _library_tokenizer(spm: SentencePieceModel, specials: list[str], eos: Optional[str]):
    """The tokenizers-library Tokenizer that encodes as SentencePiece does (unigram only)."""
    from tokenizers import Regex, Tokenizer as HFTokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    if spm.model_type != "unigram":
        raise ModelError(f"{spm.source}: a SentencePiece {spm.model_type} model; only unigram models "
                         f"(T5, Marian) are read")
    if spm.whitespace_as_suffix:
        raise ModelError(f"{spm.source}: treat_whitespace_as_suffix is not supported")
    if spm.byte_fallback and not any(p.type == BYTE for p in spm.pieces):
        raise ModelError(f"{spm.source}: byte_fallback without byte pieces")
    tok = HFTokenizer(Unigram([(p.piece, p.score) for p in spm.pieces], unk_id=spm.unk_id,
                              byte_fallback=spm.byte_fallback))
    steps = [normalizers.Precompiled(spm.precompiled_charsmap)] if spm.precompiled_charsmap else []
    if spm.remove_extra_whitespaces:     # only spaces: SentencePiece leaves newlines alone
        steps += [normalizers.Replace(Regex(r"\A +| +\z"), ""), normalizers.Replace(Regex(" {2,}"), " ")]
    if spm.escape_whitespaces:
        steps.append(normalizers.Replace(" ", "▁"))
    if spm.add_dummy_prefix:             # SentencePiece adds '▁' even before a leading '▁'
        steps.append(normalizers.Replace(Regex(r"\A▁"), "▁▁"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=False)
    tok.normalizer = normalizers.Sequence(steps)
    parts = [decoders.Replace("▁", " ")] + ([decoders.ByteFallback()] if spm.byte_fallback else [])
    parts += [decoders.Fuse()] + ([decoders.Strip(content=" ", left=1)] if spm.add_dummy_prefix else [])
    tok.decoder = decoders.Sequence(parts)
    tok.add_special_tokens(specials)
    if eos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, tok.token_to_id(eos))])
    return tok


# -- T5 --------------------------------------------------------------------------------------
def _tokenizer_config(folder: Path) -> dict:
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ModelError(f"{path}: expected a JSON object")
    return value


def t5_tokenizer(folder: Path) -> Tokenizer:
    """T5Tokenizer's ids from spiece.model (and tokenizer_config.json's extra_ids, else 100)."""
    folder = Path(folder)
    path = folder / "spiece.model"
    spm = read(path)
    extra = _tokenizer_config(folder).get("extra_ids", 100)
    if type(extra) is not int or not 0 <= extra <= 10_000:
        raise ModelError(f"{folder / 'tokenizer_config.json'}: extra_ids must be a small integer, got {extra!r}")
    present = spm.index()
    specials = [t for t in ("<pad>", "</s>", "<unk>") if t in present]
    sentinels = [f"<extra_id_{i}>" for i in reversed(range(extra))]
    tok = _library_tokenizer(spm, specials + sentinels, "</s>" if "</s>" in present else None)
    return Tokenizer(tok, str(path))


# -- Marian ----------------------------------------------------------------------------------
def _vocab(path: Path) -> dict[str, int]:
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: not a readable JSON vocabulary ({exc})") from None
    if not isinstance(vocab, dict) or not vocab:
        raise ModelError(f"{path}: expected a JSON object of piece -> id")
    ids = sorted(vocab.values()) if all(type(v) is int for v in vocab.values()) else None
    if ids != list(range(len(vocab))):
        raise ModelError(f"{path}: the ids must be 0 … {len(vocab) - 1}, each once")
    if "<unk>" not in vocab or "</s>" not in vocab:
        raise ModelError(f"{path}: the vocabulary has no {'<unk>' if '<unk>' not in vocab else '</s>'}")
    return vocab


class MarianSide(Tokenizer):
    """One side of a Marian model: that side's SentencePiece model cuts the text into pieces,
    the shared vocab.json gives their ids. The library tokenizer works in the .spm's own ids;
    `to_vocab` maps each to vocab.json's (<unk> where vocab.json lacks the piece); a piece the
    .spm does not know is looked up in vocab.json by its text, as MarianTokenizer does."""

    def __init__(self, spm_path: Path, vocab: dict[str, int], vocab_path: Path) -> None:
        spm = read(spm_path)
        specials = [t for t in ("</s>", "<unk>", "<pad>") if t in vocab]
        tok = _library_tokenizer(spm, specials, "</s>")
        super().__init__(tok, str(spm_path))
        self.vocab, self.vocab_path = vocab, vocab_path
        self.pieces = {i: p for p, i in vocab.items()}
        own = tok.get_vocab(with_added_tokens=True)
        self.to_vocab = np.full(max(own.values()) + 1, vocab["<unk>"], dtype=np.int64)
        for piece, i in own.items():
            self.to_vocab[i] = vocab.get(piece, vocab["<unk>"])
        self.to_own = {v: i for i, v in reversed(list(enumerate(self.to_vocab.tolist())))}
        self.spm_unk = spm.unk_id

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def max_id(self) -> int:
        return len(self.vocab) - 1

    def id_to_token(self, token_id: int) -> str:
        return self.pieces.get(int(token_id), f"<{token_id}>")

    def token_to_id(self, token: str) -> Optional[int]:
        return self.vocab.get(token)

    def to_json(self) -> str:
        raise ModelError(f"{self.source}: a Marian SentencePiece tokenizer has no tokenizer.json form")

    def _own_ids(self, ids) -> list[int]:
        # vocab.json ids -> the .spm's ids for the decoder; a piece the .spm lacks decodes as itself
        return [self.to_own.get(int(i), self._tok.token_to_id("<unk>") or 0) for i in ids]

    def decode_piece(self, token_id: int) -> str:
        own = self.to_own.get(int(token_id))
        if own is None:
            return self.id_to_token(token_id).replace("▁", " ")
        return self._tok.decode([own], skip_special_tokens=False)

    def continuation(self, prefix_ids, new_ids) -> list[str]:
        ids = self._own_ids(prefix_ids)
        pieces, before = [], self._tok.decode(ids, skip_special_tokens=True)
        for token in new_ids:
            ids += self._own_ids([token])
            after = self._tok.decode(ids, skip_special_tokens=True)
            pieces.append(after[len(before):] if after.startswith(before) else self.decode_piece(token))
            before = after
        return pieces

    def encode(self, text: str, max_length: int) -> Encoded:
        code, rest = _language_code(text) if isinstance(text, str) else ("", text)
        if code and not rest.strip():
            return self._code_only(code)
        encoded = super().encode(rest, max_length - (1 if code else 0))
        ids = self.to_vocab[encoded.input_ids]
        # SentencePiece names an unknown piece by its text, and MarianTokenizer looks that text
        # up in vocab.json (the other side's model may know it)
        for k in np.flatnonzero((encoded.input_ids == self.spm_unk) & ~encoded.special_tokens_mask):
            ids[k] = self.vocab.get(encoded.tokens[k], ids[k])
        if not code:
            return Encoded(encoded.tokens, ids, encoded.token_type_ids, encoded.offsets,
                           encoded.special_tokens_mask, encoded.truncated)
        return Encoded((code, *encoded.tokens),
                       np.concatenate([[self.vocab.get(code, self.vocab["<unk>"])], ids]).astype(np.int64),
                       np.concatenate([[0], encoded.token_type_ids]).astype(np.int64),
                       np.concatenate([[[0, len(code)]], encoded.offsets + len(code)]).astype(np.int64),
                       np.concatenate([[False], encoded.special_tokens_mask]).astype(bool),
                       encoded.truncated)

    def _code_only(self, code: str) -> Encoded:
        ids = np.array([self.vocab.get(code, self.vocab["<unk>"]), self.vocab["</s>"]], dtype=np.int64)
        return Encoded((code, "</s>"), ids, np.zeros(2, np.int64), np.array([[0, len(code)], [0, 0]]),
                       np.array([False, True]), False)


def _language_code(text: str) -> tuple[str, str]:
    """MarianTokenizer.remove_language_code: a leading '>>xx<<' is cut off as one token."""
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        return text[:end + 2], text[end + 2:]
    return "", text


def marian_tokenizers(folder: Path) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers of an OPUS-MT folder: source.spm, target.spm, vocab.json."""
    folder = Path(folder)
    settings = _tokenizer_config(folder)
    if settings.get("separate_vocabs") or (folder / "target_vocab.json").is_file():
        raise ModelError(f"{folder}: separate source and target vocabularies (target_vocab.json) are "
                         f"not supported; this model shares one vocab.json")
    vocab_path = folder / "vocab.json"
    vocab = _vocab(vocab_path)
    return (MarianSide(folder / "source.spm", vocab, vocab_path),
            MarianSide(folder / "target.spm", vocab, vocab_path))


def has_marian_files(folder: Path) -> bool:
    return all((Path(folder) / name).is_file() for name in MARIAN_FILES)
