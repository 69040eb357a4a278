"""config.json (and the stepper's own config): every value we cannot honour is one
ModelError line naming config.json and the field."""
import json

import pytest

from tests.builders import (bert_folder, edit_config, gpt2_folder, model_error, random_params, tiny_config,
                            wordpiece_tokenizer, write_folder)
from transformer_stepper import load_model


def test_config_json_that_is_not_json(tmp_path):
    folder = bert_folder(tmp_path / "m")
    (folder / "config.json").write_text("{'model_type': 'bert',}")
    assert model_error(load_model, folder) == (
        f"{folder / 'config.json'}: not valid JSON (Expecting property name enclosed in double "
        f"quotes: line 1 column 2 (char 1))")


@pytest.mark.parametrize("content, message", [
    (b"[1, 2]", "expected a JSON object, got list"),
    (b"\xff\xfe{}", "not valid JSON (not UTF-8 text)"),
    (b"", "not valid JSON (Expecting value: line 1 column 1 (char 0))"),
])
def test_config_json_broken_in_other_ways(tmp_path, content, message):
    folder = bert_folder(tmp_path / "m")
    (folder / "config.json").write_bytes(content)
    assert model_error(load_model, folder) == f"{folder / 'config.json'}: {message}"


def test_non_divisible_head_count(tmp_path):
    folder = bert_folder(tmp_path / "bert")
    edit_config(folder, num_attention_heads=5)
    assert model_error(load_model, folder) == (
        f"{folder / 'config.json'}: hidden_size=32 is not divisible by num_attention_heads=5")
    folder = gpt2_folder(tmp_path / "gpt2")
    edit_config(folder, n_head=3)
    assert model_error(load_model, folder) == f"{folder / 'config.json'}: n_embd=32 is not divisible by n_head=3"


SUPPORTED = ("transformer-stepper, bert, roberta, xlm-roberta, distilbert, gpt2, gemma3_text, gemma3, "
             "gemma2, olmo2, gpt_oss, deepseek_v2, mixtral, qwen2_moe, qwen3_moe, olmoe, llama, mistral, qwen2, qwen3, gemma, "
             "smollm3, phi3, "
             "gpt_neox, t5, bart, mbart, "
             "marian")


@pytest.mark.parametrize("model_type", ["mamba", None, 7])
def test_unsupported_model_type(tmp_path, model_type):
    folder = bert_folder(tmp_path / "m")
    edit_config(folder, model_type=model_type)
    assert model_error(load_model, folder) == (
        f"{folder / 'config.json'}: unsupported architecture model_type={model_type!r} "
        f"(supported: {SUPPORTED})")


@pytest.mark.parametrize("model_type", ["gemma2", "gemma3_text"])
def test_gemma_embedding_variants_are_refused_in_one_line(tmp_path, model_type):
    folder = bert_folder(tmp_path / "m")
    edit_config(folder, model_type=model_type, use_bidirectional_attention=True)
    message = model_error(load_model, folder)
    assert message == (f"{folder / 'config.json'}: use_bidirectional_attention=true (an embedding "
                       f"model) is not supported")


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query", None])
def test_unsupported_position_embedding_type(tmp_path, kind):
    folder = bert_folder(tmp_path / "m")
    edit_config(folder, position_embedding_type=kind)
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
    edit_config(folder, **changes)
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
    edit_config(folder, **changes)
    assert model_error(load_model, folder) == f"{folder / 'config.json'}: {message}"


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
        f"{tmp_path / 'config.json'}: ln_eps must be a non-negative finite number, got 'small'")
    fields = config.to_dict() | {"n_head": 5}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "transformer-stepper", "stepper_config": fields}))
    assert model_error(load_model, tmp_path) == (
        f"{tmp_path / 'config.json'}: d_model=24 is not divisible by n_head=5")


def test_a_family_module_missing_part_of_the_contract_is_named_at_import():
    import types

    from transformer_stepper.io import families
    module = types.ModuleType("transformer_stepper.io.families.half_done")
    module.MODEL_TYPES, module.LAYER_MARKER = ("half",), "layers."
    module.config_from_hf = module.detect = lambda *a: None
    with pytest.raises(TypeError, match=r"io/families/half_done.py does not declare keymap, infer_hf_config"):
        families.Family.of(module)
    assert all(isinstance(f, families.Family) for f in families.FAMILIES)
    assert [f.name for f in families.FAMILIES if f.seq2seq] == ["t5", "bart", "marian"]
