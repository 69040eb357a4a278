"""SentencePiece tokenizer fixtures: real SentencePiece unigram models trained here (the
`sentencepiece` package, only in this script), laid out as the downloaded folders have them,
and the ids transformers' sentencepiece-based tokenizers give for varied text.

    python tests/make_spm_fixtures.py      # writes tests/fixtures/spm/

spm/marian/: source.spm (trained on English), target.spm (on German), vocab.json (Marian's
layout: </s> 0, <unk> 1, the pieces of both models, <pad> last; 197 ids, as marian_tiny's
weights; two source pieces left out, which MarianTokenizer reads as <unk>), tokenizer_config.json.
spm/t5/: spiece.model (T5's ids: <pad> 0, </s> 1, <unk> 2; 97 pieces, + 100 sentinels = t5_tiny's
197), nothing else.
spm/expected.json: per text, MarianTokenizer's source ids and text_target ids (transformers
5.24, sentencepiece 0.2), and T5's: SentencePieceProcessor.encode + </s>, what the slow
T5Tokenizer computed (transformers 5 builds T5Tokenizer by converting the same file; its ids are
recorded too and checked equal)."""
from __future__ import annotations

import io
import json
import shutil
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "spm"

ENGLISH = (
    "The bank of the river is green in spring.", "She went to the bank to deposit money.",
    "He walked along the river bank until the sun set behind the hills.",
    "The old man counted his money at the bank in the city.", "A café serves coffee and tea.",
    "In 2024 the city had 3,141 cars and 42 buses.", "The naïve student wrote a résumé.",
    "Children play in the park after school.", "The weather is cold and windy today.",
    "We will meet at the station at 9 o'clock.", "Tokyo is the capital of Japan: 東京.",
    "Numbers like 100, 250 and 7 appear here.", "The river flows to the sea.",
    "My friend reads a book every week.", "The teacher explains the lesson slowly.",
)
GERMAN = (
    "Das Ufer des Flusses ist im Frühling grün.", "Sie ging zur Bank, um Geld einzuzahlen.",
    "Er ging am Ufer entlang, bis die Sonne hinter den Hügeln unterging.",
    "Der alte Mann zählte sein Geld in der Bank der Stadt.", "Ein Café serviert Kaffee und Tee.",
    "Im Jahr 2024 hatte die Stadt 3.141 Autos und 42 Busse.", "Die Straße ist sehr lang.",
    "Kinder spielen nach der Schule im Park.", "Das Wetter ist heute kalt und windig.",
    "Wir treffen uns um 9 Uhr am Bahnhof.", "Tokio ist die Hauptstadt Japans: 東京.",
    "Der Fluss fließt ins Meer.", "Mein Freund liest jede Woche ein Buch.",
    "Der Lehrer erklärt die Lektion langsam.", "Größe, Maß und Übung.",
)
TEXTS = (
    "The bank of the river.", "Ünïcödé café — naïve résumé, Größe!", "In 2024: 3,141 cars, 42 % and 0.5 km.",
    "Zyxwvut qqqq floccinaucinihilipilification", "日本語のテキスト 東京 and 北京", "  two   spaces\tand a tab  ",
    "ＡＢＣ１２３ ﬁne ½", "emoji ☕ 🙂 end", "a </s> b <unk> c", ">>de<< The bank",
    "▁leading mark", "",
)


def train(corpus, path: Path, vocab_size: int, **options) -> None:
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=model,
                                   vocab_size=vocab_size, model_type="unigram", hard_vocab_limit=False,
                                   character_coverage=0.995, minloglevel=2, **options)
    path.write_bytes(model.getvalue())


def pieces(path: Path) -> list[tuple[str, int]]:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(path))
    return [(sp.id_to_piece(i), i) for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i))]


def marian_vocab(source: Path, target: Path, size: int = 197, left_out: int = 2) -> dict[str, int]:
    vocab = {"</s>": 0, "<unk>": 1}
    source_pieces = [p for p, _ in pieces(source)]
    dropped = set(source_pieces[-left_out:])           # MarianTokenizer: <unk> for these
    for piece in source_pieces + [p for p, _ in pieces(target)]:
        if piece not in vocab and piece not in dropped and len(vocab) < size - 1:
            vocab[piece] = len(vocab)
    k = 0
    while len(vocab) < size - 1:                      # an id range as marian_tiny's weights
        vocab[f"▁unused{k}"], k = len(vocab), k + 1
    vocab["<pad>"] = len(vocab)
    return vocab


def expected_marian(folder: Path) -> dict:
    from transformers import MarianTokenizer

    tok = MarianTokenizer(source_spm=str(folder / "source.spm"), target_spm=str(folder / "target.spm"),
                          vocab=str(folder / "vocab.json"))
    out = {}
    for text in TEXTS:
        if not text.strip():
            continue
        batch = tok(text, text_target=text)
        out[text] = {"source": batch["input_ids"], "target": batch["labels"],
                     "source_pieces": tok.convert_ids_to_tokens(batch["input_ids"])}
    return out


def slow_t5(model_file: Path, extra_ids: int = 100):
    """transformers 4's slow T5Tokenizer (legacy), on transformers 5's SentencePiece backend
    (transformers 5 dropped the class; its T5Tokenizer converts the file): the special tokens
    split out, each chunk encoded by SentencePiece, </s> appended, the sentinels after the
    model's pieces (<extra_id_99> first)."""
    from transformers.tokenization_utils_sentencepiece import SentencePieceBackend

    class SlowT5Tokenizer(SentencePieceBackend):
        def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
            return token_ids_0 + [self.eos_token_id] + ([] if token_ids_1 is None else token_ids_1 + [self.eos_token_id])

    sentinels = [f"<extra_id_{i}>" for i in reversed(range(extra_ids))]
    return SlowT5Tokenizer(vocab_file=str(model_file), eos_token="</s>", unk_token="<unk>",
                           pad_token="<pad>", extra_special_tokens=sentinels, legacy=True)


def expected_t5(folder: Path) -> dict:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(folder / "spiece.model"))
    slow = slow_t5(folder / "spiece.model")
    out = {}
    for text in TEXTS + ("fill <extra_id_0> and <extra_id_99>",):
        if not text.strip():
            continue
        ids = slow(text)["input_ids"]
        plain = sp.encode(text) + [sp.piece_to_id("</s>")]
        if "<" not in text and ids != plain:
            raise SystemExit(f"the slow T5Tokenizer and SentencePiece disagree on {text!r}: {ids} vs {plain}")
        out[text] = {"ids": ids, "pieces": slow.convert_ids_to_tokens(ids)}
    return out


def compact_json(expected: dict) -> str:
    """One line per text (diffs stay readable; the file stays small)."""
    def dumps(value) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = ['{"texts": ' + dumps(expected["texts"]) + ","]
    for key in ("marian", "t5"):
        entries = [f"  {dumps(text)}: {dumps(value)}" for text, value in expected[key].items()]
        lines.append(f' "{key}": {{\n' + ",\n".join(entries) + "\n }" + ("," if key == "marian" else ""))
    return "\n".join(lines) + "\n}\n"


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    marian, t5 = FIXTURES / "marian", FIXTURES / "t5"
    for folder in (marian, t5):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    # the source model normalizes by a few rules of its own (a small compiled map), the
    # target by none (no map), T5 by nmt_nfkc (the real models' 240 kB map)
    rules = FIXTURES / "rules.tsv"
    rules.write_text("".join(f"{' '.join(f'{ord(c):X}' for c in a)}\t{' '.join(f'{ord(c):X}' for c in b)}\n"
                             for a, b in (("ﬁ", "fi"), ("Ａ", "A"), ("Ｂ", "B"), ("Ｃ", "C"), ("１", "1"),
                                          ("２", "2"), ("３", "3"), ("½", "1/2"), ("\t", " "))), encoding="utf-8")
    train(ENGLISH, marian / "source.spm", 110, normalization_rule_tsv=str(rules))
    rules.unlink()
    train(GERMAN, marian / "target.spm", 110, normalization_rule_name="identity")
    vocab = marian_vocab(marian / "source.spm", marian / "target.spm")
    (marian / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (marian / "tokenizer_config.json").write_text(json.dumps(
        {"source_lang": "en", "target_lang": "de", "separate_vocabs": False, "model_max_length": 512,
         "tokenizer_class": "MarianTokenizer"}, indent=2) + "\n", encoding="utf-8")
    train(ENGLISH + GERMAN, t5 / "spiece.model", 97, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    with tempfile.TemporaryDirectory() as tmp:       # T5Tokenizer needs nothing but the model
        shutil.copy(t5 / "spiece.model", tmp)
        expected = {"texts": [t for t in TEXTS if t.strip()], "marian": expected_marian(marian),
                    "t5": expected_t5(Path(tmp))}
    (FIXTURES / "expected.json").write_text(compact_json(expected), encoding="utf-8")
    print(f"wrote {FIXTURES}")


if __name__ == "__main__":
    main()
