"""load_model on every supported layout with the real HF key spellings: what maps where,
and that every spelling of the same weights gives the same trace."""
import json

import numpy as np
import pytest

from tests.builders import (assert_close_trace, assert_same_trace, bert_checkpoint, bert_folder, bf16_round, bytelevel_tokenizer,
                            edit_config, gpt2_checkpoint, gpt2_config_json, gpt2_folder, model_error,
                            random_params, tiny_config, vocab_size, wordpiece_tokenizer, wordpiece_vocab,
                            write_folder, write_npz_model, write_safetensors)
from transformer_stepper import load_model

TEXT = "The bank of the river."
N_WP = len(wordpiece_vocab())


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
    assert_same_trace(a, b)


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
    assert_same_trace(single, load_model(folder).trace(TEXT))
    # the index itself can be opened too
    assert_same_trace(single, load_model(folder / "model.safetensors.index.json").trace(TEXT))


def test_config_json_and_tokenizer_json_paths_open_their_folder(tmp_path):
    folder = bert_folder(tmp_path / "bert")
    reference = load_model(folder).trace(TEXT)
    assert_same_trace(reference, load_model(folder / "config.json").trace(TEXT))
    assert_same_trace(reference, load_model(str(folder / "tokenizer.json")).trace(TEXT))


def test_lone_safetensors_with_config_beside_it(tmp_path):
    folder = bert_folder(tmp_path / "bert")
    lone = folder / "weights.safetensors"
    (folder / "model.safetensors").rename(lone)
    model = load_model(lone)
    assert model.config.n_head == 4 and model.warnings == [] and model.name == "weights"
    assert_same_trace(load_model(lone).trace(TEXT), model.trace(TEXT))


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
    guesses = "ln_eps=1e-12, activation=gelu_erf" if family == "bert" else "ln_eps=1e-05, activation=gelu_tanh"
    assert model.warnings == [f"{lone}: no config.json; sizes read from the tensor shapes, settings "
                              f"guessed: n_head=2 (heads of 64 assumed), {guesses}; put the model's "
                              f"config.json beside it for exact numbers"]
    assert model.settings_guessed[0] == "n_head=2 (heads of 64 assumed)"
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
    assert all(np.array_equal(hf.params[name], model.params[name]) for name in hf.params)
    assert_close_trace(hf.trace(TEXT), model.trace(TEXT))


def test_npz_with_tokenizer_json_beside_it(tmp_path):
    config = tiny_config("sinusoidal")
    path = write_npz_model(tmp_path / "teach.npz", config, random_params(config))
    assert model_error(load_model, path) == (
        f"{tmp_path / 'tokenizer.json'}: not found (the tokenizer must sit beside the weights)")
    wordpiece_tokenizer().save(str(tmp_path / "tokenizer.json"))
    model = load_model(path)
    assert model.name == "teach" and "wpe" not in model.params
    assert load_model(tmp_path).trace(TEXT).n_seq == model.trace(TEXT).n_seq  # the folder too


def test_model_vocab_may_be_larger_than_the_tokenizer(tmp_path):
    n_vocab = vocab_size(bytelevel_tokenizer()) + 37  # padded embedding, as some models have
    model = load_model(gpt2_folder(tmp_path / "m", n_vocab=n_vocab))
    assert model.trace(TEXT).logits.shape[1] == n_vocab


def test_bert_is_decoder_is_causal(tmp_path):
    folder = bert_folder(tmp_path / "m")
    edit_config(folder, is_decoder=True)
    trace = load_model(folder).trace(TEXT)
    assert trace.config.causal
    assert np.all(trace.attentions[:, :, np.triu_indices(trace.n_seq, 1)[0], np.triu_indices(trace.n_seq, 1)[1]] == 0)


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
    edit_config(folder, n_layer=2)
    model = load_model(folder)
    assert model.config.n_layer == 2 and model.trace(TEXT).attentions.shape[0] == 2
    assert model.warnings == [f"{folder / 'model.safetensors'}: the checkpoint has 3 layers but the config "
                              f"asks for 2; the extra layers are ignored"]


def test_single_file_wins_over_a_stale_index(tmp_path):
    folder = bert_folder(tmp_path / "m")
    (folder / "model.safetensors.index.json").write_text("{broken")
    assert load_model(folder).trace(TEXT).n_seq == 8
