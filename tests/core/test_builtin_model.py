"""The SHIPPED built-in model (resources/model), opened through load_model() and traced by the
app's own forward pass: it predicts held-out text far better than word frequency, separates
the senses of ambiguous words in context while their lookup rows stay identical, has a head
that links pronouns to their nouns, and maps unknown words to [UNK]."""
import json

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.training import corpus, network
from transformer_stepper.core.model.blas import blas_threads
from transformer_stepper.core.training.evaluate import head_scores
from transformer_stepper.core.training.recipe import Recipe, heldout
from transformer_stepper.io.resources import builtin_model_dir

N_HELDOUT = 400


@pytest.fixture(scope="module")
def model():
    return load_model()


@pytest.fixture(scope="module")
def shipped():
    return json.loads((builtin_model_dir() / "recipe.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def recipe(shipped):
    return Recipe.from_dict(shipped["recipe"])


@pytest.fixture(scope="module")
def training_passages(recipe):
    return corpus.generate(recipe.corpus.n_passages, recipe.seed, recipe.corpus)


@pytest.fixture(scope="module")
def held_out(model, recipe, training_passages):
    """Passages from the held-out seed that do not occur in training, and their traces."""
    passages = heldout(recipe.replace(n_heldout=N_HELDOUT), {p.words for p in training_passages})
    with blas_threads(1):   # tiny matrices: OpenBLAS threads only cost time here (see blas.py)
        traces = [model.trace(p.text) for p in passages]
    for passage, trace in zip(passages, traces):
        assert trace.tokens == ("[BOS]", *passage.words)
    return passages, traces


def test_the_folder_is_small_and_declares_the_teaching_architecture(model, recipe):
    folder = builtin_model_dir()
    assert sum(f.stat().st_size for f in folder.iterdir()) <= 5 * 1024 * 1024
    config = model.config
    assert (config.position, config.norm, config.causal) == ("sinusoidal", "pre", True)
    assert config.final_norm and config.lm_head and "wpe" not in model.params
    assert 2 <= config.n_layer <= 4 and config.n_head >= 2
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert cfg["model_type"] == "transformer-stepper"
    assert cfg["stepper_config"]["position"] == "sinusoidal"
    # `transformer-stepper train` with no --steps/--seed reproduces this model
    assert recipe == Recipe()


def test_heldout_next_token_accuracy_is_far_above_the_unigram_baseline(model, held_out, training_passages):
    passages, traces = held_out
    counts = {}
    for passage in training_passages:
        for word in passage.words:
            counts[word] = counts.get(word, 0) + 1
    unigram_id = model.encode(max(counts, key=counts.get)).input_ids[1]   # after [BOS]
    correct = unigram = total = 0
    for trace in traces:
        targets = trace.input_ids[1:]
        correct += int(np.sum(trace.logits[:-1].argmax(axis=-1) == targets))
        unigram += int(np.sum(targets == unigram_id))
        total += len(targets)
    accuracy, baseline = correct / total, unigram / total
    assert baseline > 0.15                          # "the" is a real baseline, not a strawman
    assert accuracy > baseline + 0.35 and accuracy > 2.5 * baseline, (accuracy, baseline)


def mean_cosine(a, b, same: bool) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cosines = a @ b.T
    if same:   # leave out each vector's cosine with itself
        return float((cosines.sum() - np.trace(cosines)) / (cosines.size - len(cosines)))
    return float(cosines.mean())


def test_ambiguous_words_separate_by_sense_in_context_but_share_one_lookup_row(model, held_out):
    passages, traces = held_out
    found: dict[str, dict[str, list]] = {}
    for passage, trace in zip(passages, traces):
        for note in passage.annotations:
            if note.kind == "ambiguous":
                word, sense = note.label.split(":")
                token = note.position + 1
                row = trace["token_embeddings"][token]
                np.testing.assert_array_equal(row, model.params["wte"][trace.input_ids[token]])
                found.setdefault(word, {}).setdefault(sense, []).append(
                    (row, trace.hidden_states[0][token], trace.hidden_states[-1][token]))
    assert sorted(found) == sorted(corpus.AMBIGUOUS)
    for word, senses in found.items():
        (_, first), (_, second) = sorted(senses.items())
        assert min(len(first), len(second)) >= 10, word
        rows = np.array([r for r, _, _ in first + second])
        assert np.all(rows == rows[0]), f"{word}: the lookup row must not depend on context"
        margins = []
        for layer in (1, 2):    # e + p (differs only by position), then the last layer
            a = np.array([v[layer] for v in first])
            b = np.array([v[layer] for v in second])
            within = (mean_cosine(a, a, True) + mean_cosine(b, b, True)) / 2
            margins.append(within - mean_cosine(a, b, False))
        assert abs(margins[0]) < 0.05, (word, margins)   # position alone does not separate senses
        assert margins[1] > 0.15, (word, margins)        # context, through attention, does


def test_a_head_links_pronouns_to_their_antecedent(model, held_out, shipped):
    passages, traces = held_out
    scores, cases = head_scores([t.attentions for t in traces], passages, "pronoun")
    assert cases >= 100
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    assert scores[layer, head] >= 0.8, np.round(scores, 2)
    recorded = shipped["result"]["heads"]["pronoun"]   # the head docs/models.md describes
    assert (recorded["layer"], recorded["head"]) == (layer, head)


def test_unknown_words_become_unk_never_an_error(model):
    trace = model.trace("The zebra sat on the bank! Qwxyz?")
    assert trace.tokens == ("[BOS]", "the", "[UNK]", "sat", "on", "the", "bank", "[UNK]", "[UNK]", "[UNK]")
    assert np.all(trace.input_ids[np.array(trace.tokens) == "[UNK]"] == 1)
    assert np.all(np.isfinite(trace.logits))


def test_the_training_forward_gives_the_shipped_model_the_app_logits(model, held_out):
    passages, traces = held_out
    trace = traces[0]
    logits, _ = network.forward_batch(model.params, model.config, trace.input_ids[None])
    np.testing.assert_allclose(logits[0], trace.logits, atol=1e-5, rtol=0)
