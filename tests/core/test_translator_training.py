"""The built-in translator's training code: its batched forward equals the app's Seq2SeqModel
(loaded from the saved Marian folder) on single pairs, every gradient matches finite
differences, the corpus reorders as documented, and alignment_share reads the right cells."""
import numpy as np
import pytest

from transformer_stepper.core.training import seq2seq_network, translation_corpus as corpus
from transformer_stepper.core.training.translator import TranslatorRecipe, alignment_share, pad_pairs
from transformer_stepper.io.loader import load_model
from transformer_stepper.io.translator_folder import config_from_recipe, positions, save_translator

TINY = TranslatorRecipe(d_model=16, n_head=2, n_layer=2, d_ff=24, n_ctx=24)


def _setup(seed=0):
    tokenizer = corpus.build_tokenizer()
    hf = TINY.hf_config(tokenizer.get_vocab_size())
    config = config_from_recipe(hf)
    params = seq2seq_network.init_params(config, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    for name, value in params.items():     # not the initial gains/biases: every term matters
        value += rng.normal(0, 0.1, value.shape).astype(np.float32)
    return tokenizer, hf, config, params


def test_the_training_forward_is_the_apps_pass(tmp_path):
    tokenizer, hf, config, params = _setup()
    pairs = corpus.generate(3, seed=5)
    save_translator(tmp_path / "tr", hf, config, params, tokenizer, {})
    model = load_model(str(tmp_path / "tr"))
    encoded = corpus.encode_pairs(tokenizer, pairs)
    arrays = pad_pairs(encoded, config.pad_token_id, config.decoder_start_token_id)
    logits, _ = seq2seq_network.forward_batch(params, config, positions(config), *arrays[:3])
    for row, (pair, (src, tgt)) in enumerate(zip(pairs, encoded)):
        trace = model.trace(pair.source_text, pair.target_text)
        assert list(trace.decoder.input_ids) == [config.decoder_start_token_id, *tgt[:-1]]
        n = len(tgt)
        np.testing.assert_allclose(logits[row, :n], trace.logits[:n], atol=2e-4, rtol=1e-4)


def test_gradients_match_finite_differences():
    _, _, config, params = _setup(seed=3)
    params = {k: v.astype(np.float64) for k, v in params.items()}
    pos = positions(config).astype(np.float64)
    tokenizer = corpus.build_tokenizer()
    arrays = pad_pairs(corpus.encode_pairs(tokenizer, corpus.generate(2, seed=9)), 2, 2)
    _, grads = seq2seq_network.loss_and_grads(params, config, pos, *arrays)
    rng = np.random.default_rng(0)
    names = ["wte", "final_logits_bias", "encoder.h.0.attn.q.w", "encoder.h.1.ln_2.g",
             "decoder.h.0.cross.k.w", "decoder.h.1.cross.q.b", "decoder.h.0.cross.v.w",
             "decoder.h.1.ln_cross.b", "decoder.h.0.attn.o.w", "decoder.h.1.mlp.fc.w"]
    for name in names:
        for _ in range(3):
            index = tuple(rng.integers(0, s) for s in params[name].shape)
            if name == "wte":
                index = (int(arrays[0][0, 1]), index[1])     # a row the batch reads
            old = params[name][index]
            params[name][index] = old + 1e-5
            up, _ = seq2seq_network.loss_and_grads(params, config, pos, *arrays)
            params[name][index] = old - 1e-5
            down, _ = seq2seq_network.loss_and_grads(params, config, pos, *arrays)
            params[name][index] = old
            assert grads[name][index] == pytest.approx((up - down) / 2e-5, rel=1e-3, abs=1e-7), name


def test_the_corpus_reorders_and_disambiguates():
    pairs = corpus.generate(400, seed=2)
    for pair in pairs:
        assert pair.target[-2] == corpus.VERBS[pair.source[pair.align[-2]]]      # verb-final
        for j, word in enumerate(pair.target):
            src = pair.source[pair.align[j]]
            if src in corpus.ADJECTIVES:                                          # after its noun
                assert pair.source[pair.align[j] + 1] != "." and pair.align[j - 1] == pair.align[j] + 1
            if src == "bank":
                kind = "river" if set(pair.source) & set(corpus.RIVER_NOUNS) else "money"
                assert word == corpus.BANK[kind] and not (set(pair.source) & set(
                    corpus.MONEY_NOUNS if kind == "river" else corpus.RIVER_NOUNS))
    assert {corpus.BANK["river"], corpus.BANK["money"]} <= {w for p in pairs for w in p.target}


def test_alignment_share_reads_query_j_at_its_source_word():
    weights = np.zeros((2, 3, 4, 5))
    weights[1, 2, 0, 3] = weights[1, 2, 1, 0] = 1.0           # head (1, 2): both words aligned
    weights[0, 0, 0, 3] = 0.5
    share = alignment_share(weights, [3, 0])
    assert share.shape == (2, 3)
    assert share[1, 2] == 1.0 and share[0, 0] == 0.25 and share.sum() == 1.25
    with pytest.raises(ValueError):
        alignment_share(weights, [9, 0])
