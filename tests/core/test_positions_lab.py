"""The positions laboratory on a tiny recipe: every variant trains, is deterministic, measures
what the issue asks, and loads back as a model folder."""
import json

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.errors import ModelError
from transformer_stepper.core.forward import forward
from transformer_stepper.core.training import positions_lab as lab
from transformer_stepper.core.training.corpus import CorpusConfig
from transformer_stepper.core.training.recipe import Recipe, build_dataset
from transformer_stepper.io.positions_lab import result_row, save_variant_folder, write_results_csv

TINY = Recipe(steps=4, batch_size=8, d_model=16, n_head=2, n_layer=1, d_ff=32,
              corpus=CorpusConfig(n_passages=120), n_heldout=24)


@pytest.fixture(scope="module")
def dataset():
    return build_dataset(TINY)


@pytest.fixture(scope="module")
def trained(dataset):
    return {variant: lab.train_variant(variant, TINY, dataset) for variant in lab.VARIANTS}


def test_variants_differ_only_in_the_position_scheme(trained):
    configs = {v: t.config for v, t in trained.items()}
    assert [c.position for c in configs.values()] == ["sinusoidal", "learned", "concat", "rotary", "none"]
    assert configs["concat"].d_position == 4 and configs["concat"].d_token == 12
    reference = configs["sum_sinusoidal"].to_dict()
    for config in configs.values():
        changed = {k for k, v in config.to_dict().items() if reference[k] != v}
        assert changed <= {"position", "d_position", "name"}
    recipes = [t.recipe.to_dict() for t in trained.values()]
    for recipe in recipes:
        assert {k: v for k, v in recipe.items() if k not in ("variant", "d_position")} == \
               {k: v for k, v in recipes[0].items() if k not in ("variant", "d_position")}


def test_each_variant_measures_what_the_issue_asks(trained):
    for variant, t in trained.items():
        r = t.result
        assert 0 <= r["heldout_accuracy"] <= 1 and np.isfinite(r["heldout_loss"])
        assert set(r["phenomena_accuracy"]) == {"agreement", "ambiguous", "closing", "pronoun"}
        assert r["curve"]["step"][-1] == TINY.steps and len(r["curve"]["loss"]) == len(r["curve"]["step"])
        assert len(r["position_probe_r2"]) == t.config.n_layer + 1
        interference = r["interference"]
        if variant in ("rotary", "none"):
            assert interference is None
            continue
        assert len(interference["rms_e"]) == t.config.d_token
        assert len(interference["rms_p"]) == (t.config.d_position or t.config.d_model)
        if variant == "concat":
            assert interference["e_variance_in_p_subspace"] == 0.0
        else:
            assert 0 < interference["e_variance_in_p_subspace"] <= 1
            assert 0 < interference["mean_abs_cos"] < 1
            assert all(0 <= c <= 1 + 1e-9 for c in interference["principal_angle_cosines"])
    # the sinusoids tell positions apart from the embedding on; without positions the
    # embedding says only what the tokens' order in the corpus implies
    assert trained["sum_sinusoidal"].result["position_probe_r2"][0] > 0.8
    assert trained["none"].result["position_probe_r2"][0] < 0.5


def test_same_recipe_same_params(trained, dataset):
    again = lab.train_variant("rotary", TINY, dataset)
    first = trained["rotary"]
    assert all(np.array_equal(first.params[n], again.params[n]) for n in first.params)
    assert again.result["curve"] == first.result["curve"]
    assert not np.array_equal(trained["none"].params["h.0.attn.q.w"], first.params["h.0.attn.q.w"])


def test_interference_of_a_subspace_that_holds_e():
    """E lying inside P's span: all of its variance is there; in the orthogonal complement: none."""
    from transformer_stepper.core.config import ModelConfig

    config = ModelConfig(family="stepper", n_vocab=6, n_ctx=8, d_model=4, n_head=1, n_layer=1, d_ff=4,
                         position="learned", causal=True, final_norm=True, lm_head=True)
    wpe = np.zeros((8, 4), np.float32)
    wpe[:, :2] = np.random.default_rng(0).normal(size=(8, 2))
    inside = np.zeros((6, 4), np.float32)
    inside[:, :2] = np.random.default_rng(1).normal(size=(6, 2))
    outside = np.roll(inside, 2, axis=1)
    ids = np.arange(6)
    measured = lab.interference({"wte": inside, "wpe": wpe}, config, ids, 8)
    assert measured["e_variance_in_p_subspace"] == pytest.approx(1.0)
    assert lab.interference({"wte": outside, "wpe": wpe}, config, ids, 8)["e_variance_in_p_subspace"] == 0
    assert lab.interference({"wte": outside, "wpe": wpe}, config, ids, 8)["mean_abs_cos"] == 0


def test_unknown_variant_is_one_line():
    with pytest.raises(ModelError, match="unknown variant 'sum' \\(known: sum_sinusoidal"):
        lab.variant_recipe("sum")


def test_every_variant_saves_and_loads_as_a_model_folder(trained, tmp_path):
    rows = []
    for variant, t in trained.items():
        folder = tmp_path / variant
        folder.mkdir()
        save_variant_folder(folder, t)
        recipe = json.loads((folder / "recipe.json").read_text())
        assert recipe["recipe"]["variant"] == variant
        assert recipe["result"]["heldout_accuracy"] == t.result["heldout_accuracy"]
        assert lab.VariantRecipe.from_dict(recipe["recipe"]) == t.recipe
        model = load_model(folder)
        assert model.config == t.config
        trace = model.trace("The king sat on the bank.")
        expected = forward(t.params, t.config, trace.input_ids)["logits"]
        np.testing.assert_array_equal(trace.logits, expected)
        rows.append(result_row(t))
    write_results_csv(tmp_path / "results.csv", rows)
    lines = (tmp_path / "results.csv").read_text().splitlines()
    assert len(lines) == 6 and lines[0].startswith("variant,seed,steps,heldout_loss")
