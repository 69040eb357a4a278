"""Tokenizers built from SentencePiece models (io/sentencepiece_tokenizer.py): ids equal to
MarianTokenizer's (source and text_target) and the slow T5Tokenizer's on varied text, for real
SentencePiece models trained by tests/make_spm_fixtures.py (ids recorded there); OPUS-MT and
T5 folders without tokenizer.json open; broken files give one line naming the file."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.loader import load_model
from transformer_stepper.io.sentencepiece_model import parse, read
from transformer_stepper.io.sentencepiece_tokenizer import marian_tokenizers, t5_tokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SPM = FIXTURES / "spm"
EXPECTED = json.loads((SPM / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def marian():
    return marian_tokenizers(SPM / "marian")


@pytest.mark.parametrize("text", EXPECTED["marian"])
def test_marian_ids_equal_marian_tokenizers(marian, text):
    source, target = marian
    expected = EXPECTED["marian"][text]
    assert source.encode(text, 512).input_ids.tolist() == expected["source"]
    assert target.encode(text, 512).input_ids.tolist() == expected["target"]


@pytest.mark.parametrize("text", EXPECTED["t5"])
def test_t5_ids_equal_the_slow_t5_tokenizer(text):
    assert t5_tokenizer(SPM / "t5").encode(text, 512).input_ids.tolist() == EXPECTED["t5"][text]["ids"]


def test_the_fixture_texts_are_varied():
    texts = " ".join(EXPECTED["texts"])
    for kind in ("é", "2024", "東京", "qqqq", "ＡＢＣ", ">>de<<", "</s>"):
        assert kind in texts
    # the source and target models cut the same text differently, and some pieces are <unk>
    assert any(e["source"] != e["target"] for e in EXPECTED["marian"].values())
    assert any(1 in e["source"] for e in EXPECTED["marian"].values())


def _folder(tmp_path, weights: str, tokenizer_files) -> Path:
    folder = tmp_path / weights
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(FIXTURES / weights / name, folder)
    for path in tokenizer_files:
        shutil.copy(path, folder)
    return folder


def test_an_opus_mt_folder_opens_with_source_and_target_vocabularies(tmp_path):
    folder = _folder(tmp_path, "marian_tiny", (SPM / "marian").iterdir())
    assert not (folder / "tokenizer.json").exists()
    model = load_model(folder)
    source, target = "The bank of the river.", "Das Ufer des Flusses."
    trace = model.trace(source, target)
    expected = EXPECTED["marian"][source]
    np.testing.assert_array_equal(trace.encoder.input_ids, expected["source"])
    target_ids = marian_tokenizers(SPM / "marian")[1].encode(target, 64).input_ids
    np.testing.assert_array_equal(trace.decoder.input_ids[1:], target_ids[:-1])
    assert model.tokenizer is not model.target_tokenizer
    assert "".join(model.target_tokenizer.continuation([], trace.decoder.input_ids[1:])).strip() == target


def test_a_t5_folder_with_only_spiece_model_opens(tmp_path):
    folder = _folder(tmp_path, "t5_tiny", [SPM / "t5" / "spiece.model"])
    model = load_model(folder)
    text = "The bank of the river."
    trace = model.trace(text)
    np.testing.assert_array_equal(trace.encoder.input_ids, EXPECTED["t5"][text]["ids"])
    assert model.tokenizer.token_to_id("<extra_id_0>") == model.tokenizer.max_id() == 196


def test_the_parser_reads_what_sentencepiece_reads():
    spm = pytest.importorskip("sentencepiece")
    for path in (SPM / "marian" / "source.spm", SPM / "marian" / "target.spm", SPM / "t5" / "spiece.model"):
        ours, theirs = read(path), spm.SentencePieceProcessor(model_file=str(path))
        assert len(ours.pieces) == theirs.get_piece_size()
        for i, piece in enumerate(ours.pieces):
            assert (piece.piece, np.float32(piece.score)) == (theirs.id_to_piece(i), np.float32(theirs.get_score(i)))
            assert (piece.type == 3) == theirs.is_control(i) and (piece.type == 2) == theirs.is_unknown(i)
        assert ours.unk_id == theirs.unk_id()


@pytest.mark.parametrize("data, problem", [(b"\x0a\xff", "runs past the end"), (b"\x0f", "wire type"),
                                           (b"", "no pieces"), (b"\x12\x00", "no pieces")])
def test_a_broken_model_file_is_one_line_naming_it(data, problem):
    with pytest.raises(ModelError, match=f"^bad.spm: not a SentencePiece model.*{problem}"):
        parse(data, "bad.spm")


def test_bad_marian_folders_are_refused_naming_the_file(tmp_path):
    folder = tmp_path / "opus"
    shutil.copytree(SPM / "marian", folder)
    (folder / "vocab.json").write_text('{"</s>": 0, "<unk>": 5}', encoding="utf-8")
    with pytest.raises(ModelError, match="vocab.json: the ids must be 0"):
        marian_tokenizers(folder)
    shutil.copy(SPM / "marian" / "vocab.json", folder / "target_vocab.json")
    with pytest.raises(ModelError, match="separate source and target vocabularies"):
        marian_tokenizers(folder)
    (folder / "target_vocab.json").unlink()
    shutil.copy(SPM / "marian" / "vocab.json", folder)
    (folder / "source.spm").write_bytes((SPM / "marian" / "source.spm").read_bytes()[:100])
    with pytest.raises(ModelError, match="source.spm: not a SentencePiece model"):
        marian_tokenizers(folder)
