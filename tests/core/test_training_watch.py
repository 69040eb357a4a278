"""The hooks the Training view watches: E's gradient split into its lookup part (only the
batch's rows) and its head part (every row), pause / stop between steps, the history (bounded
snapshots, held-out loss, class separation) and the quick recipe's determinism."""
import threading

import numpy as np
import pytest

from transformer_stepper.core.training import corpus, loop, network, optim
from transformer_stepper.core.training.control import TrainControl, TrainingStopped
from transformer_stepper.core.training.history import TrainingHistory
from transformer_stepper.core.training.recipe import (QUICK, build_dataset, new_history,
                                                      train_builtin)
from transformer_stepper.core.training.watch import StableMap, class_separation, nearest_words

from .test_training_loop import small_config


@pytest.fixture(scope="module")
def tokenizer():
    return corpus.build_tokenizer()


@pytest.fixture(scope="module")
def sequences(tokenizer):
    return corpus.encode(tokenizer, corpus.generate(200, seed=5))


def tiny_batch(tokenizer, sequences):
    config = small_config(tokenizer.get_vocab_size()).replace(d_model=16, d_ff=32, n_layer=1)
    params = network.init_params(config, np.random.default_rng(0))
    inputs, targets, weights = loop.pad_batch(sequences[:3], pad_id=0)
    return config, params, inputs, targets, weights


def test_the_lookup_gradient_touches_exactly_the_batch_rows(tokenizer, sequences):
    config, params, inputs, targets, weights = tiny_batch(tokenizer, sequences)
    parts = {}
    _, grads = network.loss_and_grads(params, config, inputs, targets, weights, parts)
    in_batch = np.zeros(config.n_vocab, dtype=bool)
    in_batch[np.unique(inputs[weights > 0])] = True         # padding reaches no loss: no gradient
    lookup_rows = np.linalg.norm(parts["lookup"], axis=1)
    assert np.all(lookup_rows[in_batch] > 0)
    assert np.all(parts["lookup"][~in_batch] == 0.0)          # exactly zero, not small
    assert np.all(np.linalg.norm(parts["head"], axis=1) > 0)  # the tied head reaches every row
    np.testing.assert_allclose(parts["head"] + parts["lookup"], grads["wte"], rtol=1e-5, atol=1e-7)


def test_the_two_parts_agree_with_finite_differences(tokenizer, sequences):
    config, params, inputs, targets, weights = tiny_batch(tokenizer, sequences)
    params = {name: value.astype(np.float64) for name, value in params.items()}
    parts = {}
    _, grads = network.loss_and_grads(params, config, inputs, targets, weights, parts)
    outside = int(np.setdiff1d(np.arange(config.n_vocab), inputs)[0])
    inside = int(inputs[0, 1])
    eps = 1e-6

    def loss_at(row, column, delta):
        shifted = dict(params, wte=params["wte"].copy())
        shifted["wte"][row, column] += delta
        loss, _ = network.loss_and_grads(shifted, config, inputs, targets, weights)
        return loss

    for column in range(0, config.d_model, 5):
        # a row outside the batch changes the loss only through the head
        numeric = (loss_at(outside, column, eps) - loss_at(outside, column, -eps)) / (2 * eps)
        assert numeric == pytest.approx(parts["head"][outside, column], rel=1e-4, abs=1e-8)
        numeric = (loss_at(inside, column, eps) - loss_at(inside, column, -eps)) / (2 * eps)
        assert numeric == pytest.approx(grads["wte"][inside, column], rel=1e-4, abs=1e-8)
        assert parts["lookup"][inside, column] != 0.0


def test_step_detail_reports_the_batch_and_the_row_norms(tokenizer, sequences):
    config = small_config(tokenizer.get_vocab_size())
    seen = []
    loop.train(config, sequences, steps=2, seed=0, batch_size=8, step_detail=True,
               callback=seen.append)
    detail = seen[-1].detail
    ids = detail.batch_ids()
    assert np.all(detail.lookup_grad_norms[ids] > 0)
    outside = np.setdiff1d(np.arange(config.n_vocab), np.unique(detail.input_ids))
    assert np.all(detail.lookup_grad_norms[outside] == 0)
    assert np.all(detail.head_grad_norms > 0)


def test_stop_ends_training_between_steps(tokenizer, sequences):
    config = small_config(tokenizer.get_vocab_size())
    control = TrainControl()
    seen = []

    def stop_at_three(progress):
        seen.append(progress.step)
        if progress.step == 3:
            control.stop()

    with pytest.raises(TrainingStopped):
        loop.train(config, sequences, steps=50, seed=0, batch_size=8, callback=stop_at_three,
                   control=control)
    assert seen == [1, 2, 3]


def test_pause_waits_until_resumed_and_stop_wakes_a_paused_run(tokenizer, sequences):
    config = small_config(tokenizer.get_vocab_size())
    control = TrainControl()
    seen, resumed_at = [], []

    def resume_when_paused():
        while not control.waiting:          # the loop is held between steps
            threading.Event().wait(0.001)
        resumed_at.append(len(seen))          # no step ran while paused
        control.resume()

    def pause_at_two(progress):
        seen.append(progress.step)
        if progress.step == 2:
            control.pause()
            threading.Thread(target=resume_when_paused).start()

    loop.train(config, sequences, steps=5, seed=0, batch_size=8, callback=pause_at_two,
               control=control)
    assert seen == [1, 2, 3, 4, 5] and resumed_at == [2]
    assert control.paused_seconds > 0

    control = TrainControl()
    control.pause()
    threading.Thread(target=lambda: (threading.Event().wait(0.01), control.stop())).start()
    with pytest.raises(TrainingStopped):
        loop.train(config, sequences, steps=5, seed=0, batch_size=8, control=control)


def test_history_keeps_at_most_k_snapshots_evenly_thinned():
    history = TrainingHistory(["things"] * 4, total_steps=1000, max_snapshots=8,
                              model_fractions=(0.0, 1.0))
    params = {"wte": np.zeros((4, 2), dtype=np.float32)}
    history.start(params)
    for step in range(1, 1001):
        params["wte"] = np.full((4, 2), step, dtype=np.float32)
        history.record(loop.TrainProgress(step, 1000, 1.0, 0.1, step, 1.0,
                                          loop.StepDetail(params, None, None, None, None)))
    assert len(history.snapshots) <= 8
    assert history.snapshot_steps[0] == 0 and history.snapshot_steps[-1] == 1000
    gaps = np.diff(history.snapshot_steps[:-1])
    assert len(set(gaps.tolist())) == 1                      # evenly spread
    assert all(history.snapshots[i][0, 0] == s for i, s in enumerate(history.snapshot_steps))
    assert sorted(history.models) == [0, 1000]


def small_quick(**changes):
    return QUICK.replace(**{"n_heldout": 20, "batch_size": 16,
                            "corpus": corpus.CorpusConfig(n_passages=300, max_episodes=2),
                            "optimizer": optim.AdamConfig(lr=4e-3, warmup_steps=10), **changes})


def test_the_quick_recipe_is_deterministic_for_a_seed():
    recipe = small_quick(steps=10)
    runs = []
    for seed in (0, 0, 1):
        dataset = build_dataset(recipe.replace(seed=seed))
        history = new_history(recipe, dataset, max_snapshots=4)
        trained = train_builtin(recipe.replace(seed=seed), dataset=dataset, history=history)
        runs.append((trained, history))
    (first, history), (second, again), (other, _) = runs
    assert history.losses == again.losses
    assert all(np.array_equal(a, b) for a, b in zip(history.snapshots, again.snapshots))
    assert np.array_equal(first.params["wte"], second.params["wte"])
    assert not np.array_equal(first.params["wte"], other.params["wte"])


def test_the_history_of_a_short_run_shows_learning():
    recipe = small_quick(steps=120)
    dataset = build_dataset(recipe)
    history = new_history(recipe, dataset, max_snapshots=8, heldout_every=40)
    trained = train_builtin(recipe, dataset=dataset, history=history)
    assert np.mean(history.losses[-10:]) < 0.6 * np.mean(history.losses[:5])
    assert history.heldout_steps == [0, 40, 80, 120]
    assert history.heldout_losses[-1] < history.heldout_losses[0]
    assert history.heldout_losses[-1] < history.unigram_loss      # it uses context already
    assert history.separation[-1] > history.separation[0] + 0.005  # the classes pull apart
    assert history.separation[-1] > 4 * history.separation[0]
    assert np.array_equal(history.snapshots[-1], trained.params["wte"])
    assert sorted(history.models) == [0, 12, 60, 120]
    assert np.array_equal(history.models[120]["wte"], trained.params["wte"])
    arrays = history.to_arrays(["w"] * len(history.classes))
    assert arrays["snapshots"].shape == (len(history.snapshot_steps), trained.config.n_vocab, 48)
    assert arrays["classes"].dtype.kind == "U"


def test_a_stopped_recipe_run_raises_before_evaluating():
    recipe = small_quick(steps=5)
    control = TrainControl()
    control.stop()
    with pytest.raises(TrainingStopped):
        train_builtin(recipe, control=control)


def test_class_separation_nearest_words_and_a_stable_map():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 16)) * 3
    classes = ["a"] * 10 + ["b"] * 10 + ["c"] * 10
    clustered = np.repeat(centres, 10, axis=0) + rng.normal(size=(30, 16))
    random = rng.normal(size=(30, 16))
    assert abs(class_separation(random, classes)) < 0.05
    assert class_separation(clustered, classes) > 0.5
    ids, cosines = nearest_words(clustered, [0, 25], k=3, exclude=[1])
    assert set(ids[0]) <= set(range(2, 10)) and set(ids[1]) <= set(range(20, 30))
    assert np.all(np.diff(cosines, axis=1) <= 0)
    stable = StableMap()
    first = stable.follow(clustered)
    rotation, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    second = stable.follow(clustered @ rotation * -1)         # same table, turned and flipped
    np.testing.assert_allclose(second, first, atol=1e-8)
