"""Array export (no Qt): a stage's arrays as labelled CSV and exact .npy, the whole trace as an
.npz that round-trips exactly, and every write atomic (a full disk leaves no file behind)."""
import csv
import errno
import io
import os
import re

import numpy as np
import pytest

from tests.builders import assert_npz_holds_trace
from transformer_stepper.core.model import stages
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.trace.generate import lens
from transformer_stepper.core.model.ops import softmax
from transformer_stepper.io import array_export
from transformer_stepper.io.array_export import (StageArray, array_file_name, atomic_write,
                                                 csv_bytes, prepare_folder, save_csv, save_npy,
                                                 save_npz, stage_arrays)
from transformer_stepper.io.loader import load_model

TEXT = "the bank of the river"


@pytest.fixture(scope="module")
def bert_trace(fixtures_dir):
    model = load_model(fixtures_dir / "bert_tiny_mlm")
    return model, model.trace(TEXT)


@pytest.fixture(scope="module")
def gpt2_trace(fixtures_dir):
    model = load_model(fixtures_dir / "gpt2_tiny_lm")
    return model, model.trace(TEXT)


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------------------ what a stage holds
@pytest.mark.parametrize("which", ["bert_trace", "gpt2_trace"])
def test_every_stage_has_arrays_of_the_chosen_layer_and_head(request, which):
    model, trace = request.getfixturevalue(which)
    config = trace.config
    layer, head = config.n_layer - 1, config.n_head - 1
    assert stage_arrays(trace, "logit_lens", layer, head) == [], "the lens not computed yet"
    if config.lm_head:
        lens(model, trace)                 # computed (the stage view does it in a worker)
    for stage in stages.available_stages(config):
        arrays = stage_arrays(trace, stage.key, layer, head, model.tokenizer.id_to_token)
        assert arrays, stage.key
        for array in arrays:
            assert array.values.ndim in (1, 2), (stage.key, array.name)
            assert len(array.values) == trace.n_seq and list(array.rows) == list(trace.tokens)
    scores = {a.name: a for a in stage_arrays(trace, "scores", layer, head)}
    assert np.array_equal(scores["scores"].values, trace["scores"][layer, head])
    assert scores["scores"].columns[2] == f"2:{trace.tokens[2]}"
    if config.lm_head:
        top = {a.name: a for a in stage_arrays(trace, "logit_lens", layer, head)}["lens_top_probability"]
        assert top.columns[0] == "embedding" and len(top.columns) == config.n_layer + 1
        np.testing.assert_allclose(top.values[:, -1], softmax(trace.logits).max(-1), atol=1e-6)
    q = {a.name: a for a in stage_arrays(trace, "qkv", layer, head)}["q"]
    assert q.values.shape == (trace.n_seq, config.d_head) and q.columns is None


def test_causal_scores_include_the_mask_and_bert_has_none(bert_trace, gpt2_trace):
    names = lambda trace: [a.name for a in stage_arrays(trace, "scores", 0, 0)]  # noqa: E731
    assert "mask" in names(gpt2_trace[1]) and "mask" not in names(bert_trace[1])
    assert "token_type_embeddings" not in [a.name for a in stage_arrays(gpt2_trace[1], "position_addition", 0, 0)]


@pytest.mark.parametrize("layer, head, what", [(2, 0, "layer 2: the model has 2 layers (0–1)"),
                                               (-1, 0, "layer -1"), (0, 4, "head 4: the model has 4 heads")])
def test_a_layer_or_head_out_of_range_is_named(bert_trace, layer, head, what):
    with pytest.raises(ModelError, match=re.escape(what)):
        stage_arrays(bert_trace[1], "softmax", layer, head)


def test_file_names_carry_the_layer_and_head_only_where_the_stage_has_them():
    assert array_file_name(stages.stage("scores"), "scores_raw", 1, 3, "csv") == "06-scores-scores_raw-L1H3.csv"
    assert array_file_name(stages.stage("feed_forward"), "mlp_act", 1, 3, "npy") == "10-feed_forward-mlp_act-L1.npy"
    assert array_file_name(stages.stage("embedding"), "token_embeddings", 1, 3, "npy") == "02-embedding-token_embeddings.npy"


# ------------------------------------------------------------------------------ CSV and npy
def test_csv_has_token_labels_on_rows_and_columns_and_reads_back_exactly(tmp_path, gpt2_trace):
    _, trace = gpt2_trace
    weights = {a.name: a for a in stage_arrays(trace, "scores", 1, 2)}["scores"]
    path = tmp_path / "scores.csv"
    assert save_csv(path, weights) is False
    table = read_csv(path)
    assert table[0] == ["position", "token"] + [f"{j}:{t}" for j, t in enumerate(trace.tokens)]
    assert [row[1] for row in table[1:]] == list(trace.tokens)
    assert [int(row[0]) for row in table[1:]] == list(range(trace.n_seq))
    values = np.array([[float(v) for v in row[2:]] for row in table[1:]], dtype=np.float32)
    assert np.array_equal(values, trace["scores"][1, 2])          # -inf (masked) included
    assert table[1][3] == "-inf"


def test_csv_quotes_tokens_with_commas_and_quotes():
    array = StageArray("x", np.array([[0.1, 2.5]], dtype=np.float32), rows=['a,"b"'], columns=["c,1", "d"])
    text = csv_bytes(array).decode()
    assert list(csv.reader(io.StringIO(text))) == [["position", "token", "c,1", "d"], ["0", 'a,"b"', "0.1", "2.5"]]


def test_csv_of_ints_bools_and_unlabelled_arrays():
    ids = csv_bytes(StageArray("input_ids", np.array([101, 7]), rows=["[CLS]", "a"], columns=["id"]))
    assert ids.decode().splitlines() == ["position,token,id", "0,[CLS],101", "1,a,7"]
    mask = csv_bytes(StageArray("mask", np.array([[False, True]]))).decode().splitlines()
    assert mask == ["row,mask[0],mask[1]", "0,0,1"]


def test_npy_is_exact(tmp_path, bert_trace):
    _, trace = bert_trace
    path = tmp_path / "q.npy"
    save_npy(path, trace["q"][1, 3])
    got = np.load(path, allow_pickle=False)
    assert got.dtype == np.float32 and np.array_equal(got, trace["q"][1, 3])


# ------------------------------------------------------------------------------ npz
@pytest.mark.parametrize("which", ["bert_trace", "gpt2_trace"])
def test_npz_round_trips_the_trace_exactly_with_the_trace_command_names(tmp_path, request, which):
    _, trace = request.getfixturevalue(which)
    path = tmp_path / "trace.npz"
    save_npz(path, trace)
    assert_npz_holds_trace(path, trace, TEXT)


# ------------------------------------------------------------------------------ bad input
def test_a_full_disk_leaves_no_file_and_keeps_the_old_one(tmp_path, bert_trace, monkeypatch):
    path = tmp_path / "trace.npz"
    path.write_bytes(b"previous")

    def full_disk(handle, **arrays):
        handle.write(b"PK half an archive")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(ModelError) as caught:
        save_npz(path, bert_trace[1])
    assert str(caught.value) == f"{path}: cannot write (no space left on device)"
    assert leftovers(tmp_path) == ["trace.npz"] and path.read_bytes() == b"previous"


def test_replacing_a_file_says_so(tmp_path):
    path = tmp_path / "a.bin"
    assert array_export.write_bytes(path, b"1") is False
    assert array_export.write_bytes(path, b"22") is True
    assert path.read_bytes() == b"22" and leftovers(tmp_path) == ["a.bin"]


def test_missing_folder_unwritable_folder_and_a_folder_in_the_way(tmp_path, monkeypatch):
    with pytest.raises(ModelError, match="folder does not exist"):
        atomic_write(tmp_path / "missing" / "a.csv", lambda h: h.write(b""))
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(ModelError, match="is a folder"):
        atomic_write(tmp_path / "dir.csv", lambda h: h.write(b""))

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(array_export.os, "open", refuse)   # root ignores chmod: simulate
    with pytest.raises(ModelError, match=r"a\.csv: cannot write \(permission denied\)$"):
        atomic_write(tmp_path / "a.csv", lambda h: h.write(b""))
    assert leftovers(tmp_path) == ["dir.csv"]


def test_an_exception_in_the_writer_removes_the_temporary_file(tmp_path):
    def broken(handle):
        handle.write(b"half")
        raise ValueError("bug")

    with pytest.raises(ValueError):
        atomic_write(tmp_path / "x.csv", broken)
    assert leftovers(tmp_path) == []


def test_prepare_folder(tmp_path, monkeypatch):
    assert prepare_folder(tmp_path / "new").is_dir()
    assert prepare_folder(tmp_path / "new") == tmp_path / "new"
    with pytest.raises(ModelError, match="folder does not exist"):
        prepare_folder(tmp_path / "a" / "b")
    (tmp_path / "file").write_text("")
    with pytest.raises(ModelError, match="is a file, not a folder"):
        prepare_folder(tmp_path / "file")
    monkeypatch.setattr(array_export.os, "access", lambda *a: False)
    with pytest.raises(ModelError, match="cannot write"):
        prepare_folder(tmp_path / "new")


def test_data_files_of_a_stage_and_the_trace_into_a_new_folder(tmp_path, gpt2_trace):
    model, trace = gpt2_trace
    stage = stages.stage("prediction")
    files = array_export.data_files(trace, stage, 1, 2, ["csv", "npz"], model.tokenizer.id_to_token)
    assert [name for name, _ in files] == ["12-prediction-final_ln_out.csv", "12-prediction-logits.csv",
                                           "trace.npz"]
    written = array_export.write_data_files(tmp_path / "data", files)
    assert [(p.name, replaced) for p, replaced in written] == [(n, False) for n, _ in files]
    header = read_csv(tmp_path / "data" / "12-prediction-logits.csv")[0]
    assert header[2:5] == [f"{j}:{model.tokenizer.id_to_token(j)}" for j in range(3)]
    with pytest.raises(ValueError, match="unknown data formats"):
        array_export.data_files(trace, stage, 0, 0, ["xlsx"])
