"""The difference between a clean and an intervened trace at every stage: zero for identical
traces, the exact norms on a hand-made pair, and an ablation at layer L changes nothing before
L and bites at L's attention output."""
import numpy as np
import pytest

from tests.core.test_architectures import make as make_llama
from tests.core.test_forward import make_model
from tests.conftest import FIXTURES
from transformer_stepper import AblateHead, NoPositions, SwapEmbedding, load_model
from transformer_stepper.core.model import stages
from transformer_stepper.core.analysis.differences import (
    _compare_exact,
    compare,
    shown_arrays,
    stage_differences,
    stage_grid)

TEXT = "the bank of the river and the money"


def test_the_exact_values_on_a_hand_made_pair():
    clean = np.array([[3.0, 4.0], [6.0, 8.0], [0.0, 1.0]], np.float32)       # [n_seq 3, d 2]
    intervened = np.array([[3.0, 4.0], [6.0, 5.0], [0.0, 1.0]], np.float32)
    d = compare("x", 2, clean, intervened)
    # Δ = 0 at positions 0 and 2; (0, -3) at position 1, whose clean row has norm 10
    np.testing.assert_array_equal(d.relative_at, [0.0, 0.3, 0.0])
    np.testing.assert_array_equal(d.max_abs_at, [0.0, 3.0, 0.0])
    assert d.relative == pytest.approx(3 / np.sqrt(25 + 100 + 1), rel=1e-12)
    assert d.max_abs == 3.0 and d.at(1) == (pytest.approx(0.3), 3.0) and d.at() == (d.relative, 3.0)
    assert d.relative_per_head is None


def test_heads_masked_entries_and_a_zero_clean_norm():
    clean = np.array([[[1.0, -np.inf], [2.0, 2.0]], [[0.0, -np.inf], [0.0, 0.0]]], np.float32)  # [2, 2, 2]
    intervened = clean.copy()
    intervened[1, 1] = [1.0, 0.0]                   # head 1, query 1: was all zeros
    d = compare("scores", 0, clean, intervened)
    assert np.isfinite(d.relative) and d.relative == pytest.approx(1 / np.sqrt(1 + 4 + 4))
    np.testing.assert_array_equal(d.relative_at, [0.0, pytest.approx(np.sqrt(1 / 8))])
    np.testing.assert_array_equal(d.relative_per_head, [0.0, np.inf])
    assert compare("same", None, clean, clean).relative == 0.0
    with pytest.raises(ValueError, match="x of layer 1: clean shape"):
        compare("x", 1, clean, clean[:1])


@pytest.mark.parametrize("make", [lambda: make_model("gpt2"), lambda: make_model("bert"), make_llama])
def test_identical_traces_differ_by_zero_everywhere(make):
    model = make()
    differences = stage_differences(model.trace(TEXT), model.trace(TEXT))
    assert differences and all(d.relative == 0 and d.max_abs == 0 and not d.relative_at.any()
                               for d in differences.values())
    # every array a stage computes is compared, in every layer
    names = {name for name, _ in differences}
    assert {"token_embeddings", "q", "scores", "attn_weights", "head_outputs", "attn_out",
            "mlp_out", "layer_out"} <= names <= set(shown_arrays())
    assert all((name, layer) in differences for name in ("q", "layer_out")
               for layer in range(model.config.n_layer))


@pytest.mark.parametrize("source", ["gpt2", "llama", "gpt2_tiny_lm", "builtin"])
def test_ablating_head_h_of_layer_l_changes_nothing_before_l(source):
    model = {"gpt2": lambda: make_model("gpt2"), "llama": make_llama,
             "gpt2_tiny_lm": lambda: load_model(FIXTURES / "gpt2_tiny_lm"),
             "builtin": lambda: load_model(None)}[source]()
    L = model.config.n_layer - 1
    clean = model.trace(TEXT)
    ablated = model.trace(TEXT, interventions=[AblateHead(L, 1)])
    differences = stage_differences(clean, ablated)
    before_the_layers = {name for s in stages.STAGES if s.number < 5 for name in s.computes}
    for (name, layer), d in differences.items():
        if (layer is None and name in before_the_layers) or (layer is not None and layer < L):
            assert d.relative == 0 and d.max_abs == 0, (name, layer)
    for name in ("q", "k", "v", "scores", "attn_weights"):      # L's attention reads the same input
        assert differences[(name, L)].relative == 0
    bite = differences[("attn_out", L)]
    assert bite.relative > 0 and bite.max_abs > 0
    np.testing.assert_allclose(differences[("head_outputs", L)].relative_per_head > 0,
                               np.arange(model.config.n_head) == 1)
    # the grid: rows are stages, the ablation first shows in L's weighted-sum cell
    grid = stage_grid(differences, model.config)
    values = np.nan_to_num(grid.values, nan=0.0)
    assert not values[:, :L].any()
    first = next(row for row, key in enumerate(grid.stages) if values[row, L] > 0)
    assert grid.stages[first] == "weighted_sum" and grid.most_changed_head(first, L) == 1
    assert grid.largest(grid.stages.index("output_projection"), L).name in ("attn_out", "heads_concat",
                                                                            "attn_residual")


def test_the_grid_places_stages_that_run_once_and_reads_a_position():
    model = make_model("gpt2")
    clean = model.trace(TEXT)
    swapped = model.trace(TEXT, interventions=[SwapEmbedding(position=2, token_id=7)])
    differences = stage_differences(clean, swapped)
    grid = stage_grid(differences, model.config)
    n_layer = model.config.n_layer
    embedding, prediction = grid.stages.index("embedding"), grid.stages.index("prediction")
    assert grid.values[embedding, 0] > 0 and np.isnan(grid.values[embedding, 1:]).all()
    assert grid.values[prediction, -1] > 0 and np.isnan(grid.values[prediction, :-1]).all()
    assert "tokenize" not in grid.stages and "logit_lens" not in grid.stages
    assert list(grid.stages) == [s.key for s in stages.available_stages(model.config) if s.key in grid.stages]
    # gpt2 is causal: the positions before the swapped one do not change at all
    before = stage_grid(differences, model.config, position=1)
    assert np.nan_to_num(before.values).max() == 0
    at = stage_grid(differences, model.config, position=2)
    assert at.values[embedding, 0] == differences[("token_embeddings", None)].relative_at[2] > 0
    assert at.values.shape == (len(at.stages), n_layer)


def test_a_rotary_model_without_positions_skips_the_missing_angles():
    model = make_llama()
    differences = stage_differences(model.trace(TEXT), model.trace(TEXT, interventions=[NoPositions()]))
    assert ("rope_angles", None) not in differences and ("q", 0) in differences
    assert differences[("q", 0)].relative > 0


def test_the_fast_float32_way_agrees_with_the_exact_one():
    model = make_llama()
    clean = model.trace(TEXT)
    ablated = model.trace(TEXT, interventions=[AblateHead(0, 1), NoPositions()])
    first = stage_differences(clean, ablated)
    again = stage_differences(clean, ablated)          # the clean norms kept from the first time
    for key, d in first.items():
        name, layer = key
        c = clean[name] if layer is None else clean.layer(name, layer)
        i = ablated[name] if layer is None else ablated.layer(name, layer)
        exact = _compare_exact(name, layer, c, i, clean.mask if name in ("scores", "scores_raw") else None)
        for other in (again[key], exact):
            assert d.relative == pytest.approx(other.relative, rel=1e-5, abs=1e-12), key
            assert d.max_abs == pytest.approx(other.max_abs, rel=1e-6), key
            np.testing.assert_allclose(d.relative_at, other.relative_at, rtol=1e-5, atol=1e-12)
            if d.relative_per_head is not None:
                np.testing.assert_allclose(d.relative_per_head, other.relative_per_head, rtol=1e-5, atol=1e-12)
    # a layer the intervention does not reach is the clean one's own arrays: zero, not computed
    partial = model.intervene(clean, [AblateHead(1, 0)])
    assert partial.detail(0) is clean.detail(0)        # (q itself is derived when read)
    assert stage_differences(clean, partial)[("q", 0)].relative == 0


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_the_logits_are_compared_though_a_trace_makes_them_when_read(kind):
    # the prediction stage computes the logits; a trace no longer keeps them in `arrays`, and
    # a model without a final norm (BERT) would otherwise have no prediction row at all
    model = make_model(kind, lm_head=True) if kind == "bert" else make_model(kind)
    assert model.config.lm_head
    clean = model.trace(TEXT)
    swapped = model.trace(TEXT, interventions=[SwapEmbedding(position=2, token_id=7)])
    differences = stage_differences(clean, swapped)
    assert ("logits", None) in differences
    expected = compare("logits", None, clean.logits, swapped.logits)
    got = differences[("logits", None)]
    assert got.relative == pytest.approx(expected.relative, rel=1e-5)
    assert got.max_abs == pytest.approx(expected.max_abs, rel=1e-5)
    np.testing.assert_allclose(got.relative_at, expected.relative_at, rtol=1e-5)
    grid = stage_grid(differences, model.config)
    assert "prediction" in grid.stages
    assert grid.values[grid.stages.index("prediction"), -1] > 0
