"""load_model on every supported layout with the real HF key spellings, and every broken
input: each failure is one ModelError line naming the file, the tensor or the value."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.builders import (bert_checkpoint, bert_config_json, bert_folder, bf16_round,
                            bytelevel_tokenizer, gpt2_checkpoint, gpt2_config_json, gpt2_folder,
                            model_error, random_params, tiny_config, vocab_size, wordpiece_tokenizer,
                            wordpiece_vocab, write_folder, write_npz_model, write_safetensors)
from transformer_stepper import Model, load_model
from transformer_stepper.io.loader import CONVERT_HINT

TEXT = "The bank of the river."
N_WP = len(wordpiece_vocab())


def _same_trace(a, b):
    assert a.tokens == b.tokens
    for name in a.names():
        assert a[name].tobytes() == b[name].tobytes(), name


def _edit_config(folder, **changes):
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    path.write_text(json.dumps(cfg))
    return path


# ------------------------------------------------------------------------------ good layouts
def test_bert_checkpoint_names_map_onto_the_core_layout(tmp_path):
    folder = bert_folder(tmp_path / "bert")
    model = load_model(folder)
    t = bert_checkpoint(N_WP)
    p = model.params
    assert model.config.family == "bert" and model.config.norm == "post" and model.config.embed_norm
    assert model.config.n_head == 4 and model.config.d_ff == 64 and not model.config.lm_head
    np.testing.assert_array_equal(p["wte"], t["embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(p["wtt"], t["embeddings.token_type_embeddings.weight"])
    np.testing.assert_array_equal(p["h.1.attn.q.w"], t["encoder.layer.1.attention.self.query.weight"].T)
    np.testing.assert_array_equal(p["h.0.attn.o.b"], t["encoder.layer.0.attention.output.dense.bias"])
    np.testing.assert_array_equal(p["h.0.mlp.fc.w"], t["encoder.layer.0.intermediate.dense.weight"].T)
    np.testing.assert_array_equal(p["h.1.ln_1.g"], t["encoder.layer.1.attention.output.LayerNorm.weight"])
    np.testing.assert_array_equal(p["h.1.ln_2.b"], t["encoder.layer.1.output.LayerNorm.bias"])
    assert model.warnings == [] and model.name == "bert"


def test_bert_prefixed_gamma_beta_and_mlm_head(tmp_path):
    plain = load_model(bert_folder(tmp_path / "plain"))
    old = load_model(bert_folder(tmp_path / "old", prefix="bert.", ln="gamma", mlm_head=True))
    assert old.config.lm_head and old.config.lm_head_transform
    t = bert_checkpoint(N_WP, prefix="bert.", ln="gamma", mlm_head=True)
    np.testing.assert_array_equal(old.params["ln_emb.g"], t["bert.embeddings.LayerNorm.gamma"])
    np.testing.assert_array_equal(old.params["head.transform.w"], t["cls.predictions.transform.dense.weight"].T)
    np.testing.assert_array_equal(old.params["head.ln.b"], t["cls.predictions.transform.LayerNorm.beta"])
    np.testing.assert_array_equal(old.params["head.bias"], t["cls.predictions.bias"])
    a, b = plain.trace(TEXT), old.trace(TEXT)
    assert a.hidden_states.tobytes() == b.hidden_states.tobytes()  # same seed, same weights
    assert b.logits.shape == (b.n_seq, N_WP) and a.logits is None


@pytest.mark.parametrize("prefix", ["", "transformer."])
def test_gpt2_with_and_without_prefix_splits_c_attn_and_ignores_buffers(tmp_path, prefix):
    model = load_model(gpt2_folder(tmp_path / "gpt2", prefix=prefix))
    n_vocab = vocab_size(bytelevel_tokenizer())
    t = gpt2_checkpoint(n_vocab, prefix=prefix)
    c_attn = t[prefix + "h.1.attn.c_attn.weight"]
    for j, name in enumerate("qkv"):
        np.testing.assert_array_equal(model.params[f"h.1.attn.{name}.w"], c_attn[:, 32 * j:32 * (j + 1)])
        np.testing.assert_array_equal(model.params[f"h.1.attn.{name}.b"],
                                      t[prefix + "h.1.attn.c_attn.bias"][32 * j:32 * (j + 1)])
    np.testing.assert_array_equal(model.params["h.0.mlp.fc.w"], t[prefix + "h.0.mlp.c_fc.weight"])
    assert model.config.causal and model.config.final_norm and model.config.lm_head
    assert model.config.activation == "gelu_tanh" and model.config.d_ff == 128
    assert not any(".attn.bias" in n or "masked_bias" in n for n in model.params)
    trace = model.trace("the bank")
    assert trace.logits.shape == (trace.n_seq, n_vocab)


def test_gpt2_prefixes_give_the_same_trace(tmp_path):
    a = load_model(gpt2_folder(tmp_path / "a", prefix="")).trace(TEXT)
    b = load_model(gpt2_folder(tmp_path / "b", prefix="transformer.", buffers=False)).trace(TEXT)
    _same_trace(a, b)


def test_gpt2_buffers_of_other_dtypes_are_never_read(tmp_path):
    n_vocab = vocab_size(bytelevel_tokenizer())
    tensors = gpt2_checkpoint(n_vocab)
    tensors["h.0.attn.bias"] = np.tril(np.ones((16, 16), bool))[None, None]
    write_folder(tmp_path, tensors, gpt2_config_json(n_vocab), bytelevel_tokenizer(),
                 dtypes={"h.1.attn.bias": "U8", "h.1.attn.masked_bias": "F64"})
    assert load_model(tmp_path).trace(TEXT).n_seq == 16


@pytest.mark.parametrize("dtype", ["F16", "BF16"])
@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_half_precision_is_widened_to_float32_exactly(tmp_path, dtype, family):
    build = bert_folder if family == "bert" else gpt2_folder
    full = load_model(build(tmp_path / "f32"))
    half = load_model(build(tmp_path / dtype, dtype=dtype))
    round_trip = bf16_round if dtype == "BF16" else (lambda a: np.asarray(a).astype(np.float16).astype(np.float32))
    for name, value in full.params.items():
        assert half.params[name].dtype == np.float32
        assert half.params[name].tobytes() == round_trip(value).tobytes(), name
    trace = half.trace(TEXT)
    assert all(a.dtype == np.float32 for a in trace.arrays.values() if a.dtype.kind == "f")


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_sharded_folder_equals_single_file(tmp_path, family):
    build = bert_folder if family == "bert" else gpt2_folder
    single = load_model(build(tmp_path / "single")).trace(TEXT)
    folder = build(tmp_path / "sharded", shards=3)
    assert not (folder / "model.safetensors").exists()
    assert len(list(folder.glob("model-0000?-of-00003.safetensors"))) == 3
    _same_trace(single, load_model(folder).trace(TEXT))
    # the index itself can be opened too
    _same_trace(single, load_model(folder / "model.safetensors.index.json").trace(TEXT))


def test_config_json_and_tokenizer_json_paths_open_their_folder(tmp_path):
    folder = bert_folder(tmp_path / "bert")
    reference = load_model(folder).trace(TEXT)
    _same_trace(reference, load_model(folder / "config.json").trace(TEXT))
    _same_trace(reference, load_model(str(folder / "tokenizer.json")).trace(TEXT))


def test_lone_safetensors_with_config_beside_it(tmp_path):
    folder = bert_folder(tmp_path / "bert")
    lone = folder / "weights.safetensors"
    (folder / "model.safetensors").rename(lone)
    model = load_model(lone)
    assert model.config.n_head == 4 and model.warnings == [] and model.name == "weights"
    _same_trace(load_model(lone).trace(TEXT), model.trace(TEXT))


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_lone_safetensors_without_config_infers_sizes_and_warns(tmp_path, family):
    if family == "bert":
        folder = bert_folder(tmp_path / "m", prefix="bert.", d_model=128, d_ff=96, n_layer=3, n_ctx=20)
    else:
        folder = gpt2_folder(tmp_path / "m", d_model=128, n_layer=3, n_ctx=20)
    with_config = load_model(folder)
    (folder / "config.json").unlink()
    lone = folder / "model.safetensors"
    model = load_model(lone)
    assert model.warnings == [f"{lone}: no config.json; inferred the sizes from the tensor shapes "
                              f"and assumed 2 heads of 64"]
    fields = ("family", "n_vocab", "n_ctx", "d_model", "n_layer", "d_ff", "causal", "norm", "n_token_types")
    assert {f: getattr(model.config, f) for f in fields} == {f: getattr(with_config.config, f) for f in fields}
    assert model.config.n_head == 2
    assert model.trace(TEXT).n_seq > 2
    # the folder without config.json opens the same way
    assert load_model(folder).warnings == model.warnings


def test_lone_safetensors_without_config_and_an_odd_width(tmp_path):
    folder = bert_folder(tmp_path / "m")  # d_model 32: not a multiple of 64
    (folder / "config.json").unlink()
    lone = folder / "model.safetensors"
    assert model_error(load_model, lone) == (
        f"{lone}: no config.json, and d_model=32 is not a multiple of 64, so the head count cannot "
        f"be assumed; put the model's config.json beside it")


def test_lone_safetensors_without_config_or_known_names(tmp_path):
    path = write_safetensors(tmp_path / "w.safetensors", {"foo.weight": np.ones((2, 2), np.float32)})
    assert model_error(load_model, path) == (
        f"{path}: cannot tell the architecture from the tensor names and there is no config.json beside it")


def test_lone_safetensors_without_config_missing_a_tensor_needed_to_infer(tmp_path):
    n_vocab = vocab_size(bytelevel_tokenizer())
    tensors = gpt2_checkpoint(n_vocab, d_model=64)
    del tensors["wpe.weight"]
    path = write_safetensors(tmp_path / "g.safetensors", tensors)
    assert model_error(load_model, path) == (
        f"{path}: missing tensor wpe.weight (needed to infer the architecture without a config.json)")


def test_config_in_safetensors_metadata(tmp_path):
    n_vocab = vocab_size(bytelevel_tokenizer())
    cfg = gpt2_config_json(n_vocab, n_head=8)
    path = write_safetensors(tmp_path / "g.safetensors", gpt2_checkpoint(n_vocab),
                             metadata={"config": json.dumps(cfg)})
    bytelevel_tokenizer().save(str(tmp_path / "tokenizer.json"))
    model = load_model(path)
    assert model.config.n_head == 8 and model.warnings == []
    path = write_safetensors(tmp_path / "bad.safetensors", gpt2_checkpoint(n_vocab), metadata={"config": "{"})
    assert model_error(load_model, path) == f"{path}: metadata 'config' is not valid JSON"


def test_npz_round_trip_with_embedded_tokenizer(tmp_path):
    hf = load_model(bert_folder(tmp_path / "bert", mlm_head=True))
    path = write_npz_model(tmp_path / "m.npz", hf.config, hf.params, wordpiece_tokenizer())
    model = load_model(path)
    assert model.config == hf.config.replace(name="bert")
    _same_trace(hf.trace(TEXT), model.trace(TEXT))


def test_npz_with_tokenizer_json_beside_it(tmp_path):
    config = tiny_config("sinusoidal")
    path = write_npz_model(tmp_path / "teach.npz", config, random_params(config))
    assert model_error(load_model, path) == (
        f"{tmp_path / 'tokenizer.json'}: not found (the tokenizer must sit beside the weights)")
    wordpiece_tokenizer().save(str(tmp_path / "tokenizer.json"))
    model = load_model(path)
    assert model.name == "teach" and "wpe" not in model.params
    assert load_model(tmp_path).trace(TEXT).n_seq == model.trace(TEXT).n_seq  # the folder too


# ------------------------------------------------------------------------------ bad paths
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
        f"{path}: unsupported file type .onnx; open an HF folder, .safetensors or .npz")


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


# ------------------------------------------------------------------------------ bad tensors
def test_missing_tensor_names_the_checkpoint_tensor(tmp_path):
    tensors = bert_checkpoint(N_WP, prefix="bert.")
    del tensors["bert.encoder.layer.1.output.dense.weight"]
    folder = write_folder(tmp_path, tensors, bert_config_json(N_WP), wordpiece_tokenizer())
    assert model_error(load_model, folder) == (
        f"{folder / 'model.safetensors'}: missing tensor bert.encoder.layer.1.output.dense.weight")


def test_missing_layer_because_config_says_more_layers(tmp_path):
    folder = bert_folder(tmp_path / "m")
    _edit_config(folder, num_hidden_layers=3)
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
    _edit_config(folder, vocab_size=N_WP + 1)
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


# ------------------------------------------------------------------------------ bad config
def test_config_json_that_is_not_json(tmp_path):
    folder = bert_folder(tmp_path / "m")
    (folder / "config.json").write_text("{'model_type': 'bert',}")
    assert model_error(load_model, folder) == (
        f"{folder / 'config.json'}: not valid JSON (Expecting property name enclosed in double "
        f"quotes: line 1 column 2 (char 1))")


@pytest.mark.parametrize("content, message", [
    (b"[1, 2]", "expected a JSON object, got list"),
    (b"\xff\xfe{}", "not valid JSON ('utf-8' codec can't decode byte 0xff in position 0: invalid start byte)"),
    (b"", "not valid JSON (Expecting value: line 1 column 1 (char 0))"),
])
def test_config_json_broken_in_other_ways(tmp_path, content, message):
    folder = bert_folder(tmp_path / "m")
    (folder / "config.json").write_bytes(content)
    assert model_error(load_model, folder) == f"{folder / 'config.json'}: {message}"


def test_non_divisible_head_count(tmp_path):
    folder = bert_folder(tmp_path / "bert")
    _edit_config(folder, num_attention_heads=5)
    assert model_error(load_model, folder) == (
        f"{folder / 'config.json'}: hidden_size=32 is not divisible by num_attention_heads=5")
    folder = gpt2_folder(tmp_path / "gpt2")
    _edit_config(folder, n_head=3)
    assert model_error(load_model, folder) == f"{folder / 'config.json'}: n_embd=32 is not divisible by n_head=3"


@pytest.mark.parametrize("model_type", ["llama", None, 7])
def test_unsupported_model_type(tmp_path, model_type):
    folder = bert_folder(tmp_path / "m")
    _edit_config(folder, model_type=model_type)
    assert model_error(load_model, folder) == (
        f"{folder / 'config.json'}: unsupported architecture model_type={model_type!r} "
        f"(supported: bert, gpt2, transformer-stepper)")


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query", None])
def test_unsupported_position_embedding_type(tmp_path, kind):
    folder = bert_folder(tmp_path / "m")
    _edit_config(folder, position_embedding_type=kind)
    assert model_error(load_model, folder) == (
        f"{folder / 'config.json'}: unsupported position_embedding_type {kind!r} (only 'absolute')")


@pytest.mark.parametrize("changes, message", [
    ({"vocab_size": "many"}, "vocab_size must be a positive integer, got 'many'"),
    ({"hidden_size": 32.0}, "hidden_size must be a positive integer, got 32.0"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer, got 0"),
    ({"num_attention_heads": True}, "num_attention_heads must be a positive integer, got True"),
    ({"intermediate_size": None}, "config.json has no 'intermediate_size'"),
    ({"layer_norm_eps": "tiny"}, "layer_norm_eps must be a non-negative number, got 'tiny'"),
    ({"layer_norm_eps": -1e-5}, "layer_norm_eps must be a non-negative number, got -1e-05"),
    ({"type_vocab_size": -1}, "type_vocab_size must be a non-negative integer, got -1"),
    ({"hidden_act": "swish"}, "unsupported hidden_act 'swish' (supported: gelu, gelu_fast, gelu_new, "
                              "gelu_python, gelu_pytorch_tanh, relu)"),
    ({"hidden_act": ["gelu"]}, "unsupported hidden_act ['gelu'] (supported: gelu, gelu_fast, gelu_new, "
                               "gelu_python, gelu_pytorch_tanh, relu)"),
])
def test_bert_config_values_of_the_wrong_kind(tmp_path, changes, message):
    folder = bert_folder(tmp_path / "m")
    _edit_config(folder, **changes)
    assert model_error(load_model, folder) == f"{folder / 'config.json'}: {message}"


def test_layer_norm_eps_nan(tmp_path):
    folder = gpt2_folder(tmp_path / "m")
    (folder / "config.json").write_text(
        (folder / "config.json").read_text().replace('"layer_norm_epsilon": 1e-05', '"layer_norm_epsilon": NaN'))
    assert model_error(load_model, folder) == (
        f"{folder / 'config.json'}: layer_norm_epsilon must be a non-negative number, got nan")


@pytest.mark.parametrize("changes, message", [
    ({"reorder_and_upcast_attn": True}, "unsupported GPT-2 option reorder_and_upcast_attn=True"),
    ({"scale_attn_weights": False}, "unsupported GPT-2 option scale_attn_weights=False"),
    ({"activation_function": "silu"}, "unsupported activation_function 'silu' (supported: gelu, "
                                      "gelu_fast, gelu_new, gelu_python, gelu_pytorch_tanh, relu)"),
    ({"n_inner": 0}, "n_inner must be a positive integer, got 0"),
])
def test_gpt2_config_values_we_cannot_honour(tmp_path, changes, message):
    folder = gpt2_folder(tmp_path / "m")
    _edit_config(folder, **changes)
    assert model_error(load_model, folder) == f"{folder / 'config.json'}: {message}"


def test_bert_is_decoder_is_causal(tmp_path):
    folder = bert_folder(tmp_path / "m")
    _edit_config(folder, is_decoder=True)
    trace = load_model(folder).trace(TEXT)
    assert trace.config.causal
    assert np.all(trace.attentions[:, :, np.triu_indices(trace.n_seq, 1)[0], np.triu_indices(trace.n_seq, 1)[1]] == 0)


@pytest.mark.parametrize("stepper, message", [
    ("x", "stepper_config must be an object, got 'x'"),
    ({"family": "stepper"}, "bad model config (ModelConfig.__init__() missing 6 required positional "
                            "arguments: 'n_vocab', 'n_ctx', 'd_model', 'n_head', 'n_layer', and 'd_ff')"),
    ({"bogus": 1}, "unknown field(s) bogus"),
])
def test_bad_stepper_config(tmp_path, stepper, message):
    folder = bert_folder(tmp_path / "m")
    (folder / "config.json").write_text(json.dumps({"model_type": "transformer-stepper", "stepper_config": stepper}))
    assert model_error(load_model, folder) == f"{folder / 'config.json'}: {message}"


def test_stepper_config_with_values_of_the_wrong_type(tmp_path):
    config = tiny_config("sinusoidal")
    tensors = random_params(config)
    fields = config.to_dict() | {"ln_eps": "small"}
    write_folder(tmp_path, tensors, {"model_type": "transformer-stepper", "stepper_config": fields},
                 wordpiece_tokenizer())
    assert model_error(load_model, tmp_path) == (
        f"{tmp_path / 'model.safetensors'}: ln_eps must be a non-negative number, got 'small'")
    fields = config.to_dict() | {"n_head": 5}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "transformer-stepper", "stepper_config": fields}))
    assert model_error(load_model, tmp_path) == (
        f"{tmp_path / 'config.json'}: d_model=24 is not divisible by n_head=5")


# ------------------------------------------------------------------------------ bad index
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


# ------------------------------------------------------------------------------ tokenizer
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
        f"{folder / 'tokenizer.json'}: not found (the tokenizer must sit beside the weights)")


def test_tokenizer_whose_ids_exceed_the_vocab(tmp_path):
    folder = bert_folder(tmp_path / "m", n_vocab=50)
    assert model_error(load_model, folder) == (
        f"{folder / 'tokenizer.json'}: token id {N_WP - 1} ('##z') is outside the model's vocabulary of 50")


def test_model_vocab_may_be_larger_than_the_tokenizer(tmp_path):
    n_vocab = vocab_size(bytelevel_tokenizer()) + 37  # padded embedding, as some models have
    model = load_model(gpt2_folder(tmp_path / "m", n_vocab=n_vocab))
    assert model.trace(TEXT).logits.shape[1] == n_vocab


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


def test_untied_lm_head_gives_no_logits_and_says_so(tmp_path):
    folder = gpt2_folder(tmp_path / "g", config_overrides={"tie_word_embeddings": False})
    model = load_model(folder)
    assert not model.config.lm_head and model.trace(TEXT).logits is None
    assert model.warnings == [f"{folder / 'config.json'}: tie_word_embeddings is false and a separate LM "
                              f"head is not supported: no logits or predictions"]
    folder = bert_folder(tmp_path / "b", mlm_head=True, config_overrides={"tie_word_embeddings": False})
    model = load_model(folder)
    assert not model.config.lm_head and not model.config.lm_head_transform and len(model.warnings) == 1
    assert load_model(bert_folder(tmp_path / "plain", config_overrides={"tie_word_embeddings": False})).warnings == []


def test_config_with_fewer_layers_than_the_checkpoint_warns(tmp_path):
    folder = gpt2_folder(tmp_path / "g", prefix="transformer.", n_layer=3)
    _edit_config(folder, n_layer=2)
    model = load_model(folder)
    assert model.config.n_layer == 2 and model.trace(TEXT).attentions.shape[0] == 2
    assert model.warnings == [f"{folder / 'model.safetensors'}: the checkpoint has 3 layers but the config "
                              f"asks for 2; the extra layers are ignored"]


def test_single_file_wins_over_a_stale_index(tmp_path):
    folder = bert_folder(tmp_path / "m")
    (folder / "model.safetensors.index.json").write_text("{broken")
    assert load_model(folder).trace(TEXT).n_seq == 8


def test_tokenizer_that_cannot_tokenize(tmp_path):
    folder = bert_folder(tmp_path / "m")
    tok = json.loads((folder / "tokenizer.json").read_text())
    del tok["model"]["vocab"]["[UNK]"]  # still named as unk_token, but no longer in the vocab
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    model = load_model(folder)
    assert model_error(model.trace, "the bank ☃") == (
        f"{folder / 'tokenizer.json'}: could not tokenize the text (WordPiece error: Missing [UNK] token "
        f"from the vocabulary)")
