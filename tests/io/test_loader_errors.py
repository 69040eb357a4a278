"""load_model on broken inputs: bad paths, missing or misshapen tensors, broken shard
indexes and tokenizers; each failure is one ModelError line naming the file or tensor."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.builders import (bert_checkpoint, bert_config_json, bert_folder, bytelevel_tokenizer, edit_config,
                            gpt2_checkpoint, gpt2_config_json, gpt2_folder, model_error, random_params,
                            tiny_config, vocab_size, wordpiece_tokenizer, wordpiece_vocab, write_folder)
from transformer_stepper import Model, load_model

N_WP = len(wordpiece_vocab())


def test_bad_path(tmp_path):
    missing = tmp_path / "nope"
    assert model_error(load_model, missing) == f"{missing}: no such file or folder"
    assert model_error(load_model, str(missing / "model.safetensors")) == (
        f"{missing / 'model.safetensors'}: no such file or folder")


@pytest.mark.parametrize("path, message", [
    ("", "model path '' is empty or not text"),
    ("   ", "model path '   ' is empty or not text"),
    ("a\0b", "'a\\x00b': a path cannot contain a NUL character"),
    (b"/tmp", "model path must be a string or a path, got bytes"),
    (42, "model path must be a string or a path, got int"),
])
def test_paths_that_are_not_paths(path, message):
    assert model_error(load_model, path) == message


def test_path_too_long():
    path = "/tmp/" + "x" * 5000
    assert model_error(load_model, path).endswith(": cannot read (File name too long)")


def test_unsupported_file_type(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\x01")
    assert model_error(load_model, path) == (
        f"{path}: unsupported file type .onnx; open an HF folder, .safetensors, .gguf or .npz")


def test_folder_with_no_weights(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(bert_config_json(N_WP)))
    (tmp_path / "README.md").write_text("hi")
    assert model_error(load_model, tmp_path) == (
        f"{tmp_path}: no model.safetensors, sharded index or .npz weights found")


def test_empty_folder(tmp_path):
    assert model_error(load_model, tmp_path) == (
        f"{tmp_path}: no model.safetensors, sharded index or .npz weights found")


def test_folder_with_several_unindexed_safetensors(tmp_path):
    folder = bert_folder(tmp_path / "m")
    shutil.copy(folder / "model.safetensors", folder / "a.safetensors")
    (folder / "model.safetensors").rename(folder / "b.safetensors")
    assert model_error(load_model, folder) == (
        f"{folder}: 2 .safetensors files and no model.safetensors.index.json to say how they fit "
        f"together; open one of the files")


def test_unreadable_folder(tmp_path, monkeypatch):
    # chmod 0 does not stop root, so the refusal is simulated where the loader lists the folder
    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refuse)
    assert model_error(load_model, tmp_path) == f"{tmp_path}: cannot read (Permission denied)"


def test_missing_tensor_names_the_checkpoint_tensor(tmp_path):
    tensors = bert_checkpoint(N_WP, prefix="bert.")
    del tensors["bert.encoder.layer.1.output.dense.weight"]
    folder = write_folder(tmp_path, tensors, bert_config_json(N_WP), wordpiece_tokenizer())
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors'}: missing tensor bert.encoder.layer.1.output.dense.weight")


def test_missing_layer_because_config_says_more_layers(tmp_path):
    folder = bert_folder(tmp_path / "m")
    edit_config(folder, num_hidden_layers=3)
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors'}: missing tensor encoder.layer.2.attention.self.query.weight")


def test_missing_tensor_in_sharded_checkpoint_names_the_index(tmp_path):
    n_vocab = vocab_size(bytelevel_tokenizer())
    tensors = gpt2_checkpoint(n_vocab, prefix="transformer.")
    del tensors["transformer.ln_f.bias"]
    folder = write_folder(tmp_path, tensors, gpt2_config_json(n_vocab), bytelevel_tokenizer(), shards=2)
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors.index.json'}: missing tensor transformer.ln_f.bias")


def test_wrong_shape(tmp_path):
    tensors = bert_checkpoint(N_WP)
    tensors["encoder.layer.0.intermediate.dense.weight"] = np.zeros((65, 32), np.float32)
    folder = write_folder(tmp_path, tensors, bert_config_json(N_WP), wordpiece_tokenizer())
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors'}: tensor encoder.layer.0.intermediate.dense.weight has shape "
        f"(65, 32), expected (64, 32) (d_model=32, n_vocab={N_WP}, n_ctx=16, d_ff=64)")


def test_wrong_shape_of_fused_c_attn_is_caught_before_splitting(tmp_path):
    # a [d, 4d] c_attn would split into three plausible [d, d] blocks: it must not load
    n_vocab = vocab_size(bytelevel_tokenizer())
    tensors = gpt2_checkpoint(n_vocab)
    tensors["h.1.attn.c_attn.weight"] = np.zeros((32, 128), np.float32)
    folder = write_folder(tmp_path, tensors, gpt2_config_json(n_vocab), bytelevel_tokenizer())
    assert model_error(load_model, folder).startswith(
        f"{folder / 'model.safetensors'}: tensor h.1.attn.c_attn.weight has shape (32, 128), expected (32, 96)")


def test_vocab_size_that_disagrees_with_the_embedding(tmp_path):
    folder = bert_folder(tmp_path / "m")
    edit_config(folder, vocab_size=N_WP + 1)
    assert model_error(load_model, folder).startswith(
        f"{folder / 'model.safetensors'}: tensor embeddings.word_embeddings.weight has shape "
        f"({N_WP}, 32), expected ({N_WP + 1}, 32)")


def test_unsupported_dtype_of_a_used_tensor(tmp_path):
    n_vocab = vocab_size(bytelevel_tokenizer())
    tensors = gpt2_checkpoint(n_vocab)
    tensors["wpe.weight"] = (tensors["wpe.weight"] * 100).astype(np.int32)
    folder = write_folder(tmp_path, tensors, gpt2_config_json(n_vocab), bytelevel_tokenizer())
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors'}: tensor wpe.weight has unsupported dtype I32 (F32, F16 and BF16 are read)")


def test_truncated_model_file(tmp_path):
    folder = bert_folder(tmp_path / "m")
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    message = model_error(load_model, folder)
    assert message.startswith(f"{path}: tensor ") and message.endswith("(file truncated?)")


@pytest.mark.parametrize("index, message", [
    ("{", "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    ('{"metadata": {}}', "not a safetensors index (no 'weight_map' object)"),
    ('{"weight_map": []}', "not a safetensors index (no 'weight_map' object)"),
    ('{"weight_map": {"wte.weight": 3}}', "tensor wte.weight maps to 3, not a file name"),
    ('{"weight_map": {"wte.weight": "gone.safetensors"}}', "shard gone.safetensors is missing"),
])
def test_broken_shard_index(tmp_path, index, message):
    folder = gpt2_folder(tmp_path / "m", shards=2)
    (folder / "model.safetensors.index.json").write_text(index)
    assert model_error(load_model, folder) == f"{folder / 'model.safetensors.index.json'}: {message}"


def test_index_lists_a_tensor_the_shard_lacks(tmp_path):
    folder = gpt2_folder(tmp_path / "m", shards=2)
    index = folder / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"]["h.9.attn.c_attn.weight"] = "model-00001-of-00002.safetensors"
    index.write_text(json.dumps(data))
    assert model_error(load_model, folder) == (
        f"{folder / 'model-00001-of-00002.safetensors'}: tensor h.9.attn.c_attn.weight listed in the "
        f"index is not in the shard")


def test_missing_shard_file(tmp_path):
    folder = bert_folder(tmp_path / "m", shards=2)
    (folder / "model-00002-of-00002.safetensors").unlink()
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors.index.json'}: shard model-00002-of-00002.safetensors is missing")


def test_index_without_config(tmp_path):
    folder = bert_folder(tmp_path / "m", shards=2)
    (folder / "config.json").unlink()
    index = folder / "model.safetensors.index.json"
    assert model_error(load_model, index) == f"{folder}: no config.json beside the index"


def test_missing_tokenizer(tmp_path):
    folder = bert_folder(tmp_path / "m")
    (folder / "tokenizer.json").unlink()
    assert model_error(load_model, folder) == (
        f"{folder / 'tokenizer.json'}: not found (the tokenizer must sit beside the weights)")
    (folder / "vocab.txt").write_text("[PAD]\n")
    assert model_error(load_model, folder).endswith(
        "only a slow tokenizer's vocabulary is there: save a fast one with "
        "AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR)")


@pytest.mark.parametrize("content, reason", [
    (b"{not json", "not a valid tokenizer.json (key must be a string at line 1 column 2)"),
    (b"", "not a valid tokenizer.json (EOF while parsing a value at line 1 column 0)"),
    (b"null", "not a valid tokenizer.json (invalid type: null, expected struct Tokenizer at line 1 column 4)"),
    (b'{"model": 5}', "not a valid tokenizer.json (data did not match any variant of untagged enum "
                      "ModelUntagged at line 1 column 12)"),
    (b"\xff\xfe\x00", "not a valid tokenizer.json ("),
])
def test_corrupt_tokenizer(tmp_path, content, reason):
    folder = bert_folder(tmp_path / "m")
    (folder / "tokenizer.json").write_bytes(content)
    assert model_error(load_model, folder).startswith(f"{folder / 'tokenizer.json'}: {reason}")


def test_tokenizer_json_that_is_a_folder(tmp_path):
    folder = bert_folder(tmp_path / "m")
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").mkdir()
    assert model_error(load_model, folder) == (
        f"{folder / 'tokenizer.json'}: not a regular file (a folder); only regular files are "
        f"opened")


def test_tokenizer_whose_ids_exceed_the_vocab(tmp_path):
    folder = bert_folder(tmp_path / "m", n_vocab=50)
    assert model_error(load_model, folder) == (
        f"{folder / 'tokenizer.json'}: token id {N_WP - 1} ('##z') is outside the model's vocabulary of 50")


def test_model_constructed_directly_checks_its_params(tmp_path):
    from tests.builders import wrap

    config = tiny_config("gpt2")
    params = random_params(config)
    tok = wrap(bytelevel_tokenizer())
    missing = {k: v for k, v in params.items() if k != "h.1.mlp.proj.b"}
    assert model_error(Model, config, missing, tok, "mine") == "mine: missing tensor h.1.mlp.proj.b"
    bad = params | {"wpe": params["wpe"][:-1]}
    assert model_error(Model, config, bad, tok, "mine") == "mine: tensor wpe has shape (23, 32), expected (24, 32)"
    ints = params | {"wte": params["wte"].astype(np.int32)}
    assert model_error(Model, config, ints, tok, "mine") == "mine: tensor wte has dtype int32, expected float"
    wide = Model(config, {k: v.astype(np.float64) for k, v in params.items()}, tok)
    assert all(p.dtype == np.float32 and not p.flags.writeable for p in wide.params.values())
    assert params["wte"].flags.writeable  # the caller's arrays are left alone


def test_tokenizer_that_cannot_tokenize(tmp_path):
    folder = bert_folder(tmp_path / "m")
    tok = json.loads((folder / "tokenizer.json").read_text())
    del tok["model"]["vocab"]["[UNK]"]  # still named as unk_token, but no longer in the vocab
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    model = load_model(folder)
    assert model_error(model.trace, "the bank ☃") == (
        f"{folder / 'tokenizer.json'}: could not tokenize the text (WordPiece error: Missing [UNK] token "
        f"from the vocabulary)")
