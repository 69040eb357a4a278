"""The positions laboratory on a tiny recipe: every variant trains, is deterministic, measures
what the issue asks, and loads back as a model folder."""
import json

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.model.forward import forward
from transformer_stepper.core.training import positions_lab as lab
from transformer_stepper.core.training.corpus import CorpusConfig
from transformer_stepper.core.training.recipe import Recipe, build_dataset, train_builtin
from transformer_stepper.io.positions_lab import (CURVE_FILE, read_curve_csv, read_results_csv, result_row,
                                                  save_variant_folder, write_results_csv)

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
        assert r["curve"]["heldout_step"][0] == 0 and r["curve"]["heldout_step"][-1] == TINY.steps
        assert len(r["curve"]["heldout_loss"]) == len(r["curve"]["heldout_step"])
        assert np.isfinite(r["curve"]["unigram_loss"])
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
    # the history behind the held-out curve only reads: the weights of a run without it
    plain = train_builtin(lab.variant_recipe("rotary", TINY), None, dataset)
    assert all(np.array_equal(first.params[n], plain.params[n]) for n in first.params)
    assert not np.array_equal(trained["none"].params["h.0.attn.q.w"], first.params["h.0.attn.q.w"])


def test_interference_of_a_subspace_that_holds_e():
    """E lying inside P's span: all of its variance is there; in the orthogonal complement: none."""
    from transformer_stepper.core.model.config import ModelConfig

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
        curve, written = t.result["curve"], read_curve_csv(folder / CURVE_FILE)
        trained_at = np.isin(written["step"], curve["step"])
        np.testing.assert_array_equal(written["train_loss"][trained_at], curve["loss"])
        heldout_at = np.isin(written["step"], curve["heldout_step"])
        np.testing.assert_array_equal(written["step"][heldout_at], curve["heldout_step"])
        np.testing.assert_array_equal(written["heldout_loss"][heldout_at], curve["heldout_loss"])
        assert np.isnan(written["heldout_loss"][~heldout_at]).all()
    write_results_csv(tmp_path / "results.csv", rows)
    lines = (tmp_path / "results.csv").read_text().splitlines()
    assert len(lines) == 6 and lines[0].startswith("variant,seed,steps,heldout_loss")
    back = read_results_csv(tmp_path / "results.csv")
    assert [r["variant"] for r in back] == list(lab.VARIANTS) and back[0]["seed"] == TINY.seed
    assert back[0]["heldout_loss"] == round(rows[0]["heldout_loss"], 5) and back[3]["mean_abs_cos"] is None


def test_e_read_in_blocks_measures_what_the_whole_table_does(monkeypatch):
    """Blocks of 7 rows (the last one short) give the numbers of one block; mean |cos| is the
    mean over every pair, the share is that of the centred rows, as written out directly."""
    from transformer_stepper.core.model.config import ModelConfig

    config = ModelConfig(family="gpt2", n_vocab=50, n_ctx=12, d_model=8, n_head=1, n_layer=1, d_ff=4,
                         position="learned")
    rng = np.random.default_rng(3)
    params = {"wte": rng.normal(size=(50, 8)) + 0.3, "wpe": rng.normal(size=(12, 8))}
    whole = lab.interference(params, config, None, 12)
    monkeypatch.setattr(lab, "ROW_BLOCK", 7)
    assert lab.interference(params, config, None, 12) == whole
    e, p = params["wte"], params["wpe"]
    direct = np.mean(np.abs((e / np.linalg.norm(e, axis=1, keepdims=True))
                            @ (p / np.linalg.norm(p, axis=1, keepdims=True)).T))
    assert whole["mean_abs_cos"] == round(float(direct), 5)
    _, singular, vt = np.linalg.svd(p, full_matrices=False)      # P's span, from the rows themselves
    k = int(np.searchsorted(np.cumsum(singular ** 2) / np.sum(singular ** 2), lab.SUBSPACE_ENERGY) + 1)
    centred = e - e.mean(axis=0)
    share = np.sum((centred @ vt[:k].T) ** 2) / np.sum(centred ** 2)
    assert whole["p_rank"] == k and whole["e_variance_in_p_subspace"] == round(float(share), 5)


def test_an_opened_model_is_measured_over_its_whole_tables():
    builtin = load_model()
    measured = lab.model_interference(builtin.params, builtin.config)
    assert measured["n_tokens"] == builtin.config.n_vocab
    assert measured["n_positions"] == builtin.config.n_ctx == lab.table_positions(builtin.config, builtin.params)
    assert measured == lab.interference(builtin.params, builtin.config, np.arange(builtin.config.n_vocab),
                                        builtin.config.n_ctx)
    rotary = builtin.config.replace(position="rotary")
    assert lab.table_positions(rotary, builtin.params) == 0 and lab.model_interference(builtin.params, rotary) is None


def test_a_learned_table_counts_its_rows_past_the_offset():
    from transformer_stepper.core.model.config import ModelConfig

    config = ModelConfig(family="roberta", n_vocab=6, n_ctx=8, d_model=4, n_head=1, n_layer=1, d_ff=4,
                         position="learned", position_offset=2)
    rng = np.random.default_rng(0)
    params = {"wte": rng.normal(size=(6, 4)), "wpe": rng.normal(size=(10, 4))}
    measured = lab.model_interference(params, config)
    assert measured["n_positions"] == 8 and measured["n_tokens"] == 6
    assert measured["rms_p"] == [round(float(v), 5) for v in np.sqrt(np.mean(params["wpe"][2:] ** 2, axis=0))]
