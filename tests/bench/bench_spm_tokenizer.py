"""The SentencePiece choice, measured: reading a .spm file into the `tokenizers` library's
Unigram (io/sentencepiece_tokenizer.py) against the `sentencepiece` package, on a model of
real size (32,000 pieces with t5's nmt_nfkc map: the fixture's spiece.model with pieces added).

    PYTHONPATH=desktop python tests/bench/bench_spm_tokenizer.py

Prints: each one's import and load time, encode time for a 2,000-word text, the package's size
on disk, and whether the ids agree."""
from __future__ import annotations

import importlib
import random
import struct
import sys
import tempfile
import time
from pathlib import Path

SPM = Path(__file__).resolve().parents[1] / "fixtures" / "spm" / "t5" / "spiece.model"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _piece(text: str, score: float) -> bytes:
    body = b"\x0a" + _varint(len(text.encode())) + text.encode() + b"\x15" + struct.pack("<f", score)
    return b"\x0a" + _varint(len(body)) + body


def big_model(path: Path, n: int = 32000) -> None:
    """The fixture's pieces and specs, then made-up word pieces up to n (scores below theirs)."""
    data = SPM.read_bytes()
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyzäöüéè"
    import transformer_stepper.io.sentencepiece_model as m
    have = {p.piece for p in m.parse(data, str(SPM)).pieces}
    extra = []
    while len(have) < n:
        word = ("▁" if rng.random() < 0.6 else "") + "".join(rng.choice(letters) for _ in range(rng.randint(2, 8)))
        if word not in have:
            have.add(word)
            extra.append(_piece(word, -12.0 - rng.random() * 5))
    path.write_bytes(data + b"".join(extra))   # repeated field 1: pieces appended after the specs


def timed(function, repeat: int = 3):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "desktop"))
    from transformer_stepper.io.sentencepiece_tokenizer import t5_tokenizer
    words = ("the bank of the river café naïve 2024 Tokyo 東京 flows to the sea and "
             "zyxw qqq ＡＢＣ").split()
    rng = random.Random(1)
    text = " ".join(rng.choice(words) for _ in range(2000))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        big_model(folder / "spiece.model")
        t0 = time.perf_counter()
        spm = importlib.import_module("sentencepiece")
        print(f"import sentencepiece: {1000 * (time.perf_counter() - t0):.1f} ms")
        load_ours, ours = timed(lambda: t5_tokenizer(folder))
        load_theirs, theirs = timed(lambda: spm.SentencePieceProcessor(model_file=str(folder / "spiece.model")))
        enc_ours, ids_ours = timed(lambda: ours.encode(text, 100_000).input_ids.tolist())
        enc_theirs, ids_theirs = timed(lambda: theirs.encode(text) + [1])
        print(f"pieces: {theirs.get_piece_size():,}")
        print(f"load: tokenizers Unigram from our parser {1000 * load_ours:.1f} ms, "
              f"sentencepiece {1000 * load_theirs:.1f} ms")
        print(f"encode 2,000 words ({len(ids_ours):,} ids): ours {1000 * enc_ours:.1f} ms "
              f"(with offsets), sentencepiece {1000 * enc_theirs:.1f} ms (ids only)")
        print(f"ids equal: {ids_ours == ids_theirs}")
    package = Path(spm.__file__).parent
    size = sum(p.stat().st_size for p in package.rglob("*") if p.is_file())
    print(f"sentencepiece package on disk: {size / 2 ** 20:.1f} MiB ({package})")


if __name__ == "__main__":
    main()
