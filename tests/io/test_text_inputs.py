"""Whatever text comes in: empty text is a one-line error; odd unicode traces with offsets
inside the text; text longer than the context is truncated and flagged."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import (bert_folder, gpt2_folder, model_error, random_params, tiny_config,
                            wordpiece_tokenizer, wordpiece_vocab, wrap)
from transformer_stepper import Model, load_model
from transformer_stepper.core.model.tokenize import Encoded

ODD_TEXTS = {
    "emoji": "I 😀 love 👍🏽 the 🏳️‍🌈 bank",
    "combining": "e\u0301cole cafe\u0301 n\u0303",
    "rtl": "שלום עולם and مرحبا بالعالم",
    "zero width": "a\u200bb\u200cc\u200dd\ufeff\u2060",
    "control": "\x07bell\x1b[31mred\x7f\x08",
    "nul": "a\x00b\x00",
    "only zero width": "\u200b\u200d",
    "only nul": "\x00",
    "lone surrogate": "bank \ud800 river \udcff",
    "newlines": "line one\r\nline two\u2028three",
    "cjk": "銀行 の 川",
    "math": "𝔅𝔞𝔫𝔨 ∑ x² ≠ ∞",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {"bert": load_model(bert_folder(root / "bert", n_ctx=64)),
            "gpt2": load_model(gpt2_folder(root / "gpt2", n_ctx=64))}


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    root = tmp_path_factory.mktemp("short")
    return {"bert": load_model(bert_folder(root / "bert", n_ctx=8)),
            "gpt2": load_model(gpt2_folder(root / "gpt2", n_ctx=8))}


def _check_offsets(trace):
    offsets = trace.offsets
    assert offsets.shape == (trace.n_seq, 2) and offsets.dtype == np.int64
    assert np.all(offsets >= 0) and np.all(offsets[:, 0] <= offsets[:, 1])
    assert np.all(offsets <= len(trace.text))
    real = ~trace.special_tokens_mask
    assert np.all(offsets[real, 1] > offsets[real, 0])  # every real token covers some text


@pytest.mark.parametrize("family", ["bert", "gpt2"])
@pytest.mark.parametrize("text", ["", " ", "\n\t  \r\n", "\u3000\u00a0\u2003"])
def test_empty_or_whitespace_text(models, family, text):
    model = models[family]
    assert model_error(model.trace, text) == "empty text: type a sentence to trace"
    assert model_error(model, text) == "empty text: type a sentence to trace"


@pytest.mark.parametrize("text, kind", [(None, "NoneType"), (b"bytes", "bytes"), (5, "int")])
def test_text_that_is_not_a_string(models, text, kind):
    assert model_error(models["bert"].trace, text) == f"text must be a string, got {kind}"


@pytest.mark.parametrize("family", ["bert", "gpt2"])
@pytest.mark.parametrize("name", sorted(ODD_TEXTS))
def test_odd_unicode_traces_with_offsets_inside_the_text(models, family, name):
    text = ODD_TEXTS[name]
    trace = models[family].trace(text)
    assert trace.text == text and not trace.truncated
    _check_offsets(trace)
    assert np.all(np.isfinite(trace.hidden_states))
    np.testing.assert_allclose(trace.attentions.sum(-1), 1, atol=1e-5)


def test_lone_surrogates_tokenize_like_the_replacement_character(models):
    for model in models.values():
        a, b = model.encode("x \ud800 y"), model.encode("x \ufffd y")
        assert a.input_ids.tolist() == b.input_ids.tolist() and a.offsets.tolist() == b.offsets.tolist()


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_long_text_is_truncated_to_the_context_and_flagged(short, family):
    model = short[family]
    trace = model.trace("the bank of the river " * 20)
    assert trace.truncated and trace.n_seq == 8
    assert trace.hidden_states.shape == (3, 8, 32) and trace.attentions.shape == (2, 4, 8, 8)
    _check_offsets(trace)
    if family == "bert":  # the template's specials survive truncation
        assert trace.tokens[0] == "[CLS]" and trace.tokens[-1] == "[SEP]"


@pytest.mark.parametrize("family, text", [("bert", "the bank of the river."), ("gpt2", "abcdefgh")])
def test_text_that_exactly_fits_is_not_truncated(short, family, text):
    trace = short[family].trace(text)
    assert trace.n_seq == 8 and not trace.truncated
    assert not short[family].trace("the").truncated


def test_context_too_small_for_the_special_tokens(tmp_path):
    model = load_model(bert_folder(tmp_path / "m", n_ctx=1))
    assert model_error(model.trace, "bank") == "3 tokens is longer than the model's context of 1"


def test_token_type_ids_beyond_the_models_token_types(tmp_path):
    folder = bert_folder(tmp_path / "m", n_types=1)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["post_processor"]["single"] = [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                       {"Sequence": {"id": "A", "type_id": 1}},
                                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}]
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    model = load_model(folder)
    assert model_error(model.trace, "bank") == (
        f"{folder / 'tokenizer.json'}: token type id 1 is outside the model's 1 token types")


def test_hand_made_encodings_are_checked(models):
    model = models["bert"]
    good = model.encode("the bank")
    n = len(good.input_ids)

    def encoded(ids, types=None):
        ids = np.asarray(ids, dtype=np.int64)
        return Encoded(tokens=("x",) * len(ids), input_ids=ids,
                       token_type_ids=np.zeros(len(ids), np.int64) if types is None else np.asarray(types),
                       offsets=np.zeros((len(ids), 2), np.int64),
                       special_tokens_mask=np.zeros(len(ids), bool), truncated=False)

    n_vocab = len(wordpiece_vocab())
    assert model_error(model.trace_encoded, encoded([2, n_vocab, 3])) == (
        f"token id {n_vocab} is outside the model's vocabulary of {n_vocab}")
    assert model_error(model.trace_encoded, encoded([2, -1, 3])) == (
        f"token id -1 is outside the model's vocabulary of {n_vocab}")
    assert model_error(model.trace_encoded, encoded([])) == "input_ids must be a non-empty 1-d array, got shape (0,)"
    assert model_error(model.trace_encoded, encoded([2] * 65)) == "65 tokens is longer than the model's context of 64"
    assert model_error(model.trace_encoded, encoded([2, 3], [0])) == "token_type_ids has shape (1,), expected (2,)"
    assert model.trace_encoded(good, "the bank").n_seq == n


def test_sinusoidal_model_is_limited_to_its_context(tmp_path):
    config = tiny_config("sinusoidal", n_ctx=5)
    model = Model(config, random_params(config), wrap(wordpiece_tokenizer()))
    trace = model.trace("the bank of the river and the money")
    assert trace.truncated and trace.n_seq == 5


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=st.text(min_size=1, max_size=40))
def test_any_text_either_traces_or_is_empty(models, text):
    for model in models.values():
        if not text.strip():
            assert model_error(model.trace, text) == "empty text: type a sentence to trace"
            continue
        trace = model.trace(text)
        _check_offsets(trace)
        assert np.all(np.isfinite(trace.hidden_states))


def test_one_tokenizer_shared_by_threads_with_different_contexts(tmp_path):
    import threading

    from tests.builders import bytelevel_tokenizer

    tokenizer = wrap(bytelevel_tokenizer())
    text = "the bank of the river " * 300
    failures = []

    def work(max_length):
        for _ in range(20):
            n = len(tokenizer.encode(text, max_length=max_length).input_ids)
            if n != max_length:
                failures.append((max_length, n))

    threads = [threading.Thread(target=work, args=(50 + i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
