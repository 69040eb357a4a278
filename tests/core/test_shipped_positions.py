"""The shipped positions-laboratory variants (resources/positions/<variant>): each loads, and
re-evaluating its weights on the held-out set reproduces the table its recipe.json records."""
import json

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.model.blas import blas_threads
from transformer_stepper.core.training import positions_lab as lab
from transformer_stepper.core.training.evaluate import allowed_next_words, evaluate, unigram_prediction
from transformer_stepper.core.training.recipe import build_dataset
from transformer_stepper.io.positions_lab import CURVE_FILE, read_curve_csv, read_results_csv
from transformer_stepper.io.resources import resources_dir


def folder(variant):
    return resources_dir() / "positions" / variant


@pytest.fixture(scope="module")
def recipes():
    return {v: json.loads((folder(v) / "recipe.json").read_text(encoding="utf-8")) for v in lab.VARIANTS}


@pytest.fixture(scope="module")
def dataset(recipes):
    first = lab.VariantRecipe.from_dict(recipes["sum_sinusoidal"]["recipe"])
    for stored in recipes.values():      # one corpus for all five: the comparison is fair
        recipe = lab.VariantRecipe.from_dict(stored["recipe"])
        assert recipe.replace(variant=first.variant, d_position=0) == first
    return build_dataset(first)


@pytest.mark.parametrize("variant", lab.VARIANTS)
def test_the_shipped_table_is_reproduced(variant, recipes, dataset):
    stored = recipes[variant]
    model = load_model(folder(variant))
    assert model.config.position == lab._POSITION[variant]
    assert sum(p.stat().st_size for p in folder(variant).iterdir()) < 800_000
    with blas_threads(1):
        measured = evaluate(model.params, model.config, dataset.heldout_sequences, dataset.heldout_passages,
                            unigram_prediction(dataset.train_sequences),
                            allowed_next_words(dataset.train_passages), dataset.tokenizer)
    result = stored["result"]
    assert measured["heldout_accuracy"] == pytest.approx(result["heldout_accuracy"], abs=1e-9)
    assert measured["heldout_loss"] == pytest.approx(result["heldout_loss"], rel=1e-5)
    for kind, value in result["phenomena_accuracy"].items():
        assert measured["phenomena_accuracy"][kind] == pytest.approx(value, abs=1e-9)
    assert np.isfinite(result["curve"]["loss"]).all()
    # curve.csv holds the training curve recorded when these weights were trained
    curve = read_curve_csv(folder(variant) / CURVE_FILE)
    np.testing.assert_array_equal(curve["step"], result["curve"]["step"])
    np.testing.assert_array_equal(curve["train_loss"], result["curve"]["loss"])


def test_the_results_table_holds_three_seeds_of_every_variant_and_seed_0_is_shipped(recipes):
    rows = read_results_csv(resources_dir() / "positions" / "results.csv")
    assert sorted((r["variant"], r["seed"]) for r in rows) == sorted((v, s) for v in lab.VARIANTS for s in range(3))
    for row in rows:
        if row["seed"] == 0:
            result = recipes[row["variant"]]["result"]
            assert row["heldout_loss"] == round(result["heldout_loss"], 5)
            interference = result["interference"] or {}
            assert row["mean_abs_cos"] == interference.get("mean_abs_cos")
