"""A SentencePiece model file (.model, .spm) read as data: the protobuf wire format walked field
by field (varints, fixed32 floats, length-delimited strings), nothing executed, no protobuf
package. Only what encoding needs is kept: the pieces (string, score, type), the trainer's
model type, unknown id and byte fallback, and the normalizer's rules (the precompiled
character map, dummy prefix, whitespace handling). Field numbers are sentencepiece_model.proto's:

    ModelProto      1 pieces  2 trainer_spec  3 normalizer_spec
    SentencePiece   1 piece   2 score (float)  3 type (1 normal, 2 unknown, 3 control,
                                                      4 user-defined, 5 unused, 6 byte)
    TrainerSpec     3 model_type (1 unigram, 2 bpe, 3 word, 4 char)  24 treat_whitespace_as_suffix
                    35 byte_fallback  40 unk_id  45 unk_piece
    NormalizerSpec  1 name  2 precompiled_charsmap  3 add_dummy_prefix  4 remove_extra_whitespaces
                    5 escape_whitespaces"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from ..core.model.errors import ModelError

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
MAX_BYTES = 64 * 2 ** 20          # real models are under 5 MB; a bigger file is not one


@dataclass(frozen=True)
class Piece:
    piece: str
    score: float
    type: int = NORMAL


@dataclass(frozen=True)
class SentencePieceModel:
    pieces: tuple[Piece, ...]
    model_type: str = "unigram"
    unk_id: int = 0
    unk_piece: str = "<unk>"
    byte_fallback: bool = False
    whitespace_as_suffix: bool = False
    normalizer: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    source: str = ""

    def index(self) -> dict[str, int]:
        return {p.piece: i for i, p in enumerate(self.pieces)}


class _Wire:
    """Fields of one protobuf message: (field number, wire type, value) in file order."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.where = data, where

    def _varint(self, i: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            if i >= len(self.data) or shift > 63:
                raise ModelError(f"{self.where}: not a SentencePiece model (a number runs past the end)")
            byte = self.data[i]
            value |= (byte & 0x7F) << shift
            i, shift = i + 1, shift + 7
            if byte < 0x80:
                return value, i

    def fields(self):
        data, i, n = self.data, 0, len(self.data)
        while i < n:
            key, i = (data[i], i + 1) if data[i] < 0x80 else self._varint(i)
            number, wire = key >> 3, key & 7
            if wire == 0:
                value, i = self._varint(i)
            elif wire == 1:
                value, i = data[i:i + 8], i + 8
            elif wire == 2:
                size, i = (data[i], i + 1) if i < n and data[i] < 0x80 else self._varint(i)
                value, i = data[i:i + size], i + size
            elif wire == 5:
                value, i = data[i:i + 4], i + 4
            else:
                raise ModelError(f"{self.where}: not a SentencePiece model (wire type {wire} at byte {i})")
            if i > n:
                raise ModelError(f"{self.where}: not a SentencePiece model (a field runs past the end)")
            yield number, wire, value


def _text(value, where: str) -> str:
    if not isinstance(value, bytes):
        raise ModelError(f"{where}: not a SentencePiece model (a string field holds a number)")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelError(f"{where}: not a SentencePiece model (a piece is not UTF-8)") from None


_SCORE = struct.Struct("<f")


def _piece(data: bytes, where: str) -> Piece:
    # the layout every SentencePiece writer uses: 0x0a len piece, 0x15 score[, 0x18 type]
    # (read directly: a 32,000-piece model parses in a fifth of the time); else field by field
    size = data[1] if len(data) > 1 else 0x80
    end = 2 + size
    if data[0] == 0x0A and size < 0x80 and data[end:end + 1] == b"\x15" and len(data) >= end + 5:
        rest = data[end + 5:]
        if not rest or (len(rest) == 2 and rest[0] == 0x18 and rest[1] < 0x80):
            kind = rest[1] if rest else NORMAL
            return Piece(_text(data[2:end], where), _SCORE.unpack_from(data, end + 1)[0], kind)
    piece, score, kind = None, 0.0, NORMAL
    for number, wire, value in _Wire(data, where).fields():
        if number == 1:
            piece = _text(value, where)
        elif number == 2 and wire == 5:
            score = struct.unpack("<f", value)[0]
        elif number == 3 and wire == 0:
            kind = value
    if piece is None:
        raise ModelError(f"{where}: not a SentencePiece model (a piece without its string)")
    return Piece(piece, score, kind)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def parse(data: bytes, where: str) -> SentencePieceModel:
    pieces, fields = [], {}
    for number, wire, value in _Wire(data, where).fields():
        if number == 1 and wire == 2:
            pieces.append(_piece(value, where))
        elif number in (2, 3) and wire == 2:
            fields.update({(number, n): v for n, _, v in _Wire(value, where).fields()})
    if not pieces:
        raise ModelError(f"{where}: not a SentencePiece model (no pieces)")
    model_type = MODEL_TYPES.get(fields.get((2, 3), 1))
    if model_type is None:
        raise ModelError(f"{where}: unknown SentencePiece model type {fields[(2, 3)]}")
    unk_id = _signed(fields.get((2, 40), 0))
    if not 0 <= unk_id < len(pieces):
        raise ModelError(f"{where}: unk_id {unk_id} is not one of the {len(pieces)} pieces")
    return SentencePieceModel(
        pieces=tuple(pieces), model_type=model_type, unk_id=unk_id,
        unk_piece=_text(fields.get((2, 45), b"<unk>"), where),
        byte_fallback=bool(fields.get((2, 35), 0)), whitespace_as_suffix=bool(fields.get((2, 24), 0)),
        normalizer=_text(fields.get((3, 1), b""), where),
        precompiled_charsmap=bytes(fields.get((3, 2), b"")),
        add_dummy_prefix=bool(fields.get((3, 3), 1)), remove_extra_whitespaces=bool(fields.get((3, 4), 1)),
        escape_whitespaces=bool(fields.get((3, 5), 1)), source=where)


def read(path) -> SentencePieceModel:
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ModelError(f"{path}: {size:,} bytes is too big for a SentencePiece model")
        data = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return parse(data, str(path))
