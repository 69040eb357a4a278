"""The training loop, optimiser, corpus and tokenizer: fast checks (no full training here)."""
import numpy as np
import pytest

from transformer_stepper.core.model.config import ModelConfig
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.model.tokenize import Tokenizer
from transformer_stepper.core.training import corpus, loop, optim
from transformer_stepper.core.training.recipe import Recipe, heldout


@pytest.fixture(scope="module")
def hf_tokenizer():
    return corpus.build_tokenizer()


@pytest.fixture(scope="module")
def small_data(hf_tokenizer):
    passages = corpus.generate(300, seed=5)
    return passages, corpus.encode(hf_tokenizer, passages)


def small_config(n_vocab):
    return ModelConfig(family="stepper", n_vocab=n_vocab, n_ctx=128, d_model=32, n_head=2, n_layer=2,
                       d_ff=64, position="sinusoidal", causal=True, activation="relu",
                       final_norm=True, lm_head=True)


def run(config, sequences, seed, steps=30):
    losses = []
    params = loop.train(config, sequences, steps=steps, seed=seed, batch_size=16,
                        optimizer=optim.AdamConfig(warmup_steps=5),
                        callback=lambda p: losses.append(p.loss))
    return params, losses


def test_a_few_steps_reduce_the_loss_and_the_same_seed_gives_the_same_params(hf_tokenizer, small_data):
    config = small_config(hf_tokenizer.get_vocab_size())
    _, sequences = small_data
    first, losses = run(config, sequences, seed=3)
    assert len(losses) == 30
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])
    second, again = run(config, sequences, seed=3)
    assert again == losses
    assert all(np.array_equal(first[name], second[name]) for name in first)
    third, _ = run(config, sequences, seed=4, steps=2)
    assert not np.array_equal(first["wte"], third["wte"])


def test_progress_reports_every_step_and_an_exception_stops_training(hf_tokenizer, small_data):
    config = small_config(hf_tokenizer.get_vocab_size())
    seen = []

    def stop_at_three(progress):
        seen.append(progress)
        if progress.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loop.train(config, small_data[1], steps=50, seed=0, batch_size=8, callback=stop_at_three)
    assert [p.step for p in seen] == [1, 2, 3]
    assert seen[-1].steps == 50 and seen[-1].tokens > 0 and seen[-1].tokens_per_second > 0


def test_zero_steps_and_sequences_longer_than_the_context_are_refused(hf_tokenizer, small_data):
    config = small_config(hf_tokenizer.get_vocab_size())
    with pytest.raises(ModelError, match="steps must be a positive number, got 0"):
        loop.train(config, small_data[1], steps=0, seed=0)
    with pytest.raises(ModelError, match="exceeds n_ctx=4"):
        loop.train(config.replace(n_ctx=4), small_data[1], steps=1, seed=0)


def test_pad_batch_shifts_targets_and_weights_only_real_positions():
    inputs, targets, weights = loop.pad_batch([np.array([2, 5, 6, 7]), np.array([2, 9])], pad_id=0)
    assert inputs.tolist() == [[2, 5, 6], [2, 9, 0]]
    assert targets.tolist() == [[5, 6, 7], [9, 0, 0]]
    assert weights.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_learning_rate_warms_up_then_decays_to_the_floor():
    config = optim.AdamConfig(lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    assert optim.learning_rate(config, 1, 100) == pytest.approx(1e-4)
    assert optim.learning_rate(config, 10, 100) == pytest.approx(1e-3)
    assert optim.learning_rate(config, 100, 100) == pytest.approx(1e-4)
    rates = [optim.learning_rate(config, s, 100) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(rates, rates[1:]))


def test_adam_moves_against_the_gradient_and_clipping_bounds_the_norm():
    params = {"w": np.ones((2, 2), dtype=np.float32), "b": np.ones(2, dtype=np.float32)}
    grads = {"w": np.full((2, 2), 30.0, dtype=np.float32), "b": np.full(2, -40.0, dtype=np.float32)}
    norm = optim.clip_gradients(grads, 1.0)
    assert norm == pytest.approx(np.sqrt(4 * 900 + 2 * 1600))
    assert np.sqrt(sum(np.sum(g * g) for g in grads.values())) == pytest.approx(1.0, rel=1e-5)
    adam = optim.Adam(params, optim.AdamConfig(weight_decay=0.0))
    adam.step(params, grads, lr=0.1)
    # Adam's first step is lr * sign(g)
    np.testing.assert_allclose(params["w"], 0.9, rtol=1e-5)
    np.testing.assert_allclose(params["b"], 1.1, rtol=1e-5)


# ------------------------------------------------------------------------------ corpus
def test_the_corpus_is_reproducible_and_annotations_point_at_the_right_words():
    passages = corpus.generate(400, seed=11)
    assert passages == corpus.generate(400, seed=11)
    assert passages != corpus.generate(400, seed=12)
    people = {s: g for s, _, g, _ in corpus.PEOPLE}
    people.update({p: "plural" for _, p, _, _ in corpus.PEOPLE})
    kinds = set()
    for passage in passages:
        for note in passage.annotations:
            kinds.add(note.kind)
            word = passage.words[note.position]
            if note.kind == "pronoun":
                assert corpus.PRONOUNS[people[passage.words[note.source]]][0] == word == note.label
            elif note.kind == "ambiguous":
                assert note.label.split(":")[0] == word
            elif note.kind == "agreement":
                subject = passage.words[note.source]
                assert word == ("were" if people[subject] == "plural" else "was") == note.label
            else:
                opener = passage.words[note.source]
                assert dict(corpus.CORRELATIVES)[opener] == word == note.label
    assert kinds == {"pronoun", "ambiguous", "agreement", "closing"}


def test_every_ambiguous_word_has_two_senses_whose_lookup_is_the_same_token():
    assert len(corpus.AMBIGUOUS) >= 3
    for word, senses in corpus.AMBIGUOUS.items():
        assert len(senses) == 2
        for templates in senses.values():
            assert all(word in t.split() for t in templates)


def test_heldout_passages_never_occur_in_training():
    recipe = Recipe(corpus=corpus.CorpusConfig(n_passages=500), n_heldout=100)
    train_words = {p.words for p in corpus.generate(500, recipe.seed, recipe.corpus)}
    held = heldout(recipe)
    assert len(held) == 100 and not any(p.words in train_words for p in held)


def test_the_tokenizer_gives_back_the_words_with_bos_and_unknown_words_become_unk(hf_tokenizer):
    passages = corpus.generate(200, seed=2)
    for passage, ids in zip(passages, corpus.encode(hf_tokenizer, passages)):
        assert [hf_tokenizer.id_to_token(int(i)) for i in ids] == [corpus.BOS, *passage.words]
    tokenizer = Tokenizer(hf_tokenizer, "built-in")
    encoded = tokenizer.encode("The KING saw a zebra, by the bank!", max_length=64)
    assert encoded.tokens == ("[BOS]", "the", "king", "saw", "a", "[UNK]", ",", "by", "the", "bank", "[UNK]")
    assert encoded.special_tokens_mask.tolist() == [True] + [False] * 10
    assert [hf_tokenizer.token_to_id(t) for t in corpus.SPECIAL_TOKENS] == [0, 1, 2]


def test_the_recipe_round_trips_through_a_dict():
    recipe = Recipe(seed=7, steps=12)
    assert Recipe.from_dict(recipe.to_dict()) == recipe
    with pytest.raises(ModelError, match="unknown field"):
        Recipe.from_dict({"steps": 3, "colour": "red"})
