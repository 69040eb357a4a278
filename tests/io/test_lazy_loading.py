"""Only the tensors the model uses are read; float32 stays memory-mapped; fused tensors are
read once. Unused tensors of any size or dtype never cost anything."""
import json
import mmap
import os

import numpy as np
import pytest

from tests.builders import (_encode, bert_checkpoint, bert_config_json, gpt2_folder,
                            wordpiece_tokenizer, wordpiece_vocab, write_raw_safetensors)
from transformer_stepper import load_model
from transformer_stepper.io import safetensors_file
from transformer_stepper.io.families.bert import bert_keymap
from transformer_stepper.io.families.gpt2 import gpt2_keymap

HUGE = 2**28  # float32 elements: 1 GiB, present only as a sparse hole in the file


def _mapped(a: np.ndarray) -> bool:
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, mmap.mmap)


def _write_with_unused(path, tensors, unused_dtypes):
    """A safetensors file with `tensors`, plus unused tensors of exotic dtypes and one 1 GiB
    float32 tensor whose bytes are a sparse hole (reading it would allocate 1 GiB)."""
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        raw = _encode(tensors[name], "F32") if tensors[name].dtype.kind == "f" else tensors[name].tobytes()
        kind = "F32" if tensors[name].dtype.kind == "f" else "I64"
        header[name] = {"dtype": kind, "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    for name, (kind, itemsize) in unused_dtypes.items():
        header[name] = {"dtype": kind, "shape": [16 // itemsize], "data_offsets": [offset, offset + 16]}
        chunks.append(bytes(range(16)))
        offset += 16
    header["unused.huge"] = {"dtype": "F32", "shape": [HUGE], "data_offsets": [offset, offset + 4 * HUGE]}
    write_raw_safetensors(path, header, b"".join(chunks))
    os.truncate(path, path.stat().st_size + 4 * HUGE)
    return path


def _owner(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


@pytest.fixture
def spy(monkeypatch):
    """Whole-tensor reads (get) by name; row gathers (the embedding lookup) are listed in
    spy.rows and are not whole reads."""
    reads = Reads()
    real_get, real_rows = safetensors_file.SafetensorsFile.get, safetensors_file.SafetensorsFile.rows

    def get(self, name):
        reads.append(name)
        return real_get(self, name)

    def rows(self, name, index):
        reads.rows.append(name)
        return real_rows(self, name, index)

    monkeypatch.setattr(safetensors_file.SafetensorsFile, "get", get)
    monkeypatch.setattr(safetensors_file.SafetensorsFile, "rows", rows)
    return reads


class Reads(list):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[str] = []


def test_only_used_tensors_are_read(tmp_path, spy):
    n_vocab = len(wordpiece_vocab())
    # BertForPreTraining-like: pooler and NSP head unused, position_ids an int64 buffer
    tensors = bert_checkpoint(n_vocab, prefix="bert.", mlm_head=True, pooler=True, position_ids=True)
    tensors["cls.seq_relationship.weight"] = np.ones((2, 32), np.float32)
    _write_with_unused(tmp_path / "model.safetensors", tensors,
                       {"bert.pooler.extra": ("F8_E4M3", 1), "quant.scales": ("I8", 1),
                        "other.table": ("U16", 2), "future.type": ("F6_E3M2", 1)})
    (tmp_path / "config.json").write_text(json.dumps(bert_config_json(n_vocab)))
    wordpiece_tokenizer().save(str(tmp_path / "tokenizer.json"))

    model = load_model(tmp_path)
    assert not spy and not spy.rows, "opening reads no tensor data"
    trace = model.trace("the bank of the river")
    assert trace.n_seq == 7
    assert "cls.predictions.bias" not in spy, "no logits asked for, so the vocabulary bias is unread"
    assert trace.logits_at(2).shape == (n_vocab,)      # the head reads it when asked
    expected = {("" if ckpt.startswith("cls.") else "bert.") + ckpt
                for _, ckpt, _ in bert_keymap(model.config, ("weight", "bias"))}
    assert len(spy) == len(set(spy)), "no tensor is read whole twice"
    assert set(spy) | set(spy.rows) == expected  # nothing else
    # the lookup tables are gathered by rows, not read whole (the tied head reads wte whole)
    assert set(spy.rows) == {"bert.embeddings.word_embeddings.weight",
                             "bert.embeddings.position_embeddings.weight",
                             "bert.embeddings.token_type_embeddings.weight"}
    assert not any(n.startswith(("bert.pooler", "unused", "quant", "other", "cls.seq"))
                   or n.endswith(("position_ids", "decoder.weight", "decoder.bias")) for n in spy)


def test_float32_params_stay_memory_mapped_and_read_only(tmp_path):
    model = load_model(gpt2_folder(tmp_path / "m"))
    for name, value in model.params.items():
        assert _mapped(value), name
        assert value.dtype == np.float32 and not value.flags.writeable, name
    with pytest.raises(ValueError):
        model.params["wte"][0, 0] = 1.0


def test_fused_c_attn_is_read_once_and_q_k_v_share_it(tmp_path, spy):
    model = load_model(gpt2_folder(tmp_path / "m", dtype="F16", prefix=""))
    model.trace("the bank")
    assert spy.count("h.0.attn.c_attn.weight") == 1 and spy.count("h.0.attn.c_attn.bias") == 1
    q, k, v = (model.params[f"h.0.attn.{n}.w"] for n in "qkv")
    assert _owner(q) is _owner(k) is _owner(v) and _owner(q).shape == (32, 96)  # one widened c_attn
    assert not _mapped(q) and not q.flags.writeable  # widened from float16: a read-only copy
    expected = {ckpt for _, ckpt, _ in gpt2_keymap(model.config)}
    assert set(spy) | set(spy.rows) == expected and len(spy) == len(set(spy))  # buffers never read
