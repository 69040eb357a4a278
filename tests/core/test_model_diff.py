"""Two models on one text (core/analysis/model_diff.py): a model against itself drifts by exactly 0; the
measures on hand-made arrays; a weight changed in one layer leaves everything before it equal
and shows where it bites; the last hidden state is compared after the final norm; what cannot
be compared is refused in one line naming the token or the tensor."""
import json
import math

import numpy as np
import pytest

from tests.builders import random_params, tiny_config, tokenizer_for, wrap
from transformer_stepper.core.analysis import model_diff as md
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.trace.model import Model

TEXT = {"bert": "The bank of the river, and the money.", "gpt2": "the bank of the river",
        "llama": "the bank of the river and the money"}


def make(kind: str, seed: int = 0, edit=None, **changes) -> Model:
    config = tiny_config(kind, **changes)
    params = random_params(config, seed)
    if edit is not None:
        params = dict(params)
        edit(params)
    return Model(config, params, wrap(tokenizer_for(kind)), source=f"tiny-{kind}")


@pytest.mark.parametrize("kind", ["bert", "gpt2", "llama"])
def test_a_model_against_itself_drifts_by_exactly_zero(kind):
    a, b = make(kind), make(kind)              # two loads of the same weights
    diff = md.diff_traces(a.trace(TEXT[kind]), b.trace(TEXT[kind]))
    assert all(d.relative == 0.0 and d.cosine == pytest.approx(1.0, abs=1e-12) for d in diff.hidden)
    assert np.all(diff.token_drift() == 0.0)
    assert np.all(diff.stage_map() == 0.0)          # every stage this family records
    for layer in diff.layers:
        assert np.all(layer.attention_divergence == 0.0)
        assert layer.added_attention == 0.0 and layer.added_feed_forward == 0.0
    assert diff.output.kl == 0.0 and diff.output.top1_agree == 1.0
    assert diff.largest_addition() is None                # no sub-block adds any drift
    assert np.all(diff.output.rank_of_a_top_in_b == 1) and np.all(diff.output.rank_of_b_top_in_a == 1)
    assert all(v == 0.0 for _, v in md.weight_errors(a.params, b.params, list(a.params)))


def test_drift_on_a_hand_made_pair():
    b = np.array([[3.0, 4.0], [6.0, 8.0], [0.0, 1.0]], np.float32)       # [n_seq 3, d 2]
    a = np.array([[3.0, 4.0], [6.0, 5.0], [0.0, -1.0]], np.float32)
    d = md.drift(a, b)
    # position 1: Δ = (0, -3), ‖b‖ = 10; position 2: Δ = (0, -2), ‖b‖ = 1
    np.testing.assert_allclose(d.relative_at, [0.0, 0.3, 2.0])
    assert d.relative == pytest.approx(math.sqrt(9 + 4) / math.sqrt(25 + 100 + 1))
    cos_1 = (36 + 40) / (10 * math.sqrt(36 + 25))
    assert d.cosine == pytest.approx((1 + cos_1 - 1) / 3)
    # heads side by side: [n_head 2, n_seq 1, d 1] is one position's vector (b: (1, 1), a: (1, -1))
    heads = md.drift(np.array([[[1.0]], [[-1.0]]]), np.array([[[1.0]], [[1.0]]]))
    assert heads.cosine == pytest.approx(0.0, abs=1e-15) and heads.relative == pytest.approx(math.sqrt(2))
    with pytest.raises(ModelError, match=r"x: shape \[3, 2\] in A and \[2, 2\] in B"):
        md.drift(a, b[:2], "x")


def test_divergences_and_ranks_on_hand_made_distributions():
    assert md.js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(math.log(2))
    assert md.js_divergence([0.5, 0.5], [0.5, 0.5]) == 0.0
    expected = 0.5 * (0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)) \
        + 0.5 * (0.0 + 1.0 * math.log(1.0 / 0.75))      # p = (.5, .5), q = (0, 1), m = (.25, .75)
    assert md.js_divergence([0.5, 0.5], [0.0, 1.0]) == pytest.approx(expected)
    logits_a = np.array([[0.0, 0.0, -1.0], [2.0, 1.0, 0.0]], np.float32)
    logits_b = np.array([[math.log(3.0), 0.0, -1.0], [0.0, 1.0, 2.0]], np.float32)
    out = md.output_drift(logits_a, logits_b)
    p_b = np.exp([math.log(3.0), 0.0, -1.0]) / np.exp([math.log(3.0), 0.0, -1.0]).sum()
    p_a = np.exp([0.0, 0.0, -1.0]) / np.exp([0.0, 0.0, -1.0]).sum()
    assert out.kl_at[0] == pytest.approx(float((p_b * np.log(p_b / p_a)).sum()), rel=1e-6)
    np.testing.assert_array_equal(out.top_a, [0, 0])
    np.testing.assert_array_equal(out.top_b, [0, 2])
    np.testing.assert_array_equal(out.top1_agree_at, [True, False])
    np.testing.assert_array_equal(out.rank_of_a_top_in_b, [1, 3])   # A's top (0) is B's last
    np.testing.assert_array_equal(out.rank_of_b_top_in_a, [1, 3])
    assert out.top1_agree == 0.5


def test_a_changed_output_projection_bites_at_its_layers_attention_output():
    def scale_o(params):
        params["h.1.attn.o.w"] = params["h.1.attn.o.w"] * np.float32(1.5)
    a, b = make("llama", edit=scale_o), make("llama")
    diff = md.diff_traces(a.trace(TEXT["llama"]), b.trace(TEXT["llama"]))
    columns = {name: i for i, name in enumerate(md.STAGES)}
    grid = diff.stage_map()
    assert np.all(grid[0] == 0.0)                               # layer 0 untouched
    for name in ("q", "k", "v", "attn_weights", "head_outputs"):
        assert grid[1, columns[name]] == 0.0                    # before the projection
    assert grid[1, columns["attn_out"]] == pytest.approx(0.5, rel=1e-5)   # 1.5 W: Δ = 0.5 out
    assert grid[1, columns["mlp_out"]] > 0
    assert diff.hidden[1].relative == 0.0 and diff.hidden[2].relative > 0
    layer, part, rise = diff.largest_addition()
    assert (layer, part) == (1, "attention") and rise > 0
    errors = dict(md.weight_errors(a.params, b.params, list(a.params)))
    assert errors.pop("h.1.attn.o.w") == pytest.approx(0.5, rel=1e-6)
    assert all(v == 0.0 for v in errors.values())
    reading = md.readout(diff)
    assert reading.largest == (1, "attention", rise) and reading.kl == diff.output.kl > 0


def test_the_last_hidden_state_is_compared_after_the_final_norm():
    def scale_final_norm(params):
        for name in ("ln_f.g", "ln_f.b"):              # the final norm's output doubled
            params[name] = params[name] * np.float32(2.0)
    a, b = make("gpt2", edit=scale_final_norm), make("gpt2")
    diff = md.diff_traces(a.trace(TEXT["gpt2"]), b.trace(TEXT["gpt2"]))
    doc = json.loads(json.dumps(diff.to_json()))               # plain JSON
    assert doc["tokens"] == [int(i) for i in a.encode(TEXT["gpt2"]).input_ids]
    assert doc["embedding"] == {"hidden_rel": 0.0, "hidden_cos": pytest.approx(1.0)}
    assert [entry["layer"] for entry in doc["layers"]] == [0, 1]
    assert doc["layers"][0]["hidden_rel"] == 0.0 and doc["layers"][0]["attn_rel"] == 0.0
    assert doc["layers"][1]["mlp_rel"] == 0.0                   # the block itself is the same
    assert doc["layers"][1]["hidden_rel"] == pytest.approx(1.0, rel=1e-6)   # 2·(g, b): Δ = B's output
    assert doc["output"]["kl"] > 0 and 0 <= doc["output"]["top1_agree"] <= 1


def test_what_cannot_be_compared_is_refused_in_one_line():
    with pytest.raises(ModelError, match=r"tokenizers differ at token 2: A gives 'bank' \(id 7\), B gives 'ban' \(id 9\)"):
        md.check_same_tokens([1, 5, 7], ["<s>", "the", "bank"], [1, 5, 9, 4], ["<s>", "the", "ban", "k"])
    with pytest.raises(ModelError, match=r"token 3: B gives 'k', the other ends the text there \(3 and 4 tokens\)"):
        md.check_same_tokens([1, 5, 7], ["<s>", "the", "bank"], [1, 5, 7, 4], ["<s>", "the", "bank", "k"])
    wide, narrow = tiny_config("llama"), tiny_config("llama", d_ff=64)
    with pytest.raises(ModelError, match=r"tensor h\.0\.mlp\.(gate|up)\.w is \[32, 48\] in F16 and \[32, 64\] in Q4"):
        md.check_same_shape(wide, narrow, ("F16", "Q4"))
    with pytest.raises(ModelError, match="architectures differ"):
        md.check_same_shape(tiny_config("llama"), tiny_config("llama", n_layer=3))
    a, b = make("gpt2"), make("gpt2")
    with pytest.raises(ModelError, match="tokenizers differ at token"):
        md.diff_traces(a.trace("the bank"), b.trace("the river"))


def test_comparing_every_layer_leaves_the_held_layers_as_they_were():
    a, b = make("llama"), make("llama", seed=1)
    trace_a = a.trace(TEXT["llama"], detail_layers=(1,))
    held = trace_a.cache.layers()
    md.diff_traces(trace_a, b.trace(TEXT["llama"]))
    assert trace_a.cache.layers() == held and trace_a.cache.computed >= a.config.n_layer - len(held)


FAMILIES = ("bert_tiny", "gpt2_tiny_lm", "roberta_tiny", "distilbert_tiny", "llama_tiny", "mistral_tiny",
            "qwen2_tiny", "qwen3_tiny", "gemma_tiny", "gemma2_tiny", "gemma3_tiny", "phi3_tiny",
            "pythia_tiny", "neox_tiny_sequential", "olmo2_tiny", "smollm3_tiny")


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_a_changed_last_feed_forward_is_found_there(name):
    """Post-LN, parallel residual, sandwich and output norms: the stages are read alike, and a
    weight changed in the last feed-forward drifts nothing before it."""
    from tests.conftest import FIXTURES
    from transformer_stepper import load_model

    a = load_model(FIXTURES / name)
    last = a.config.n_layer - 1
    params = dict(a.params)
    params[f"h.{last}.mlp.proj.w"] = params[f"h.{last}.mlp.proj.w"] * np.float32(1.01)
    b = Model(a.config, params, a.tokenizer, source="changed")
    text = "The bank of the river, and the money."
    same = md.diff_traces(a.trace(text), a.trace(text))
    assert all(d.relative == 0.0 for d in same.hidden) and np.all(same.stage_map() == 0.0)
    diff = md.diff_traces(b.trace(text), a.trace(text))
    grid = diff.stage_map()
    assert not np.isnan(grid).any(), name            # every family records every compared stage
    assert np.all(grid[:last] == 0.0)
    columns = {s: i for i, s in enumerate(md.STAGES)}
    assert grid[last, columns["attn_out"]] == 0.0 and grid[last, columns["mlp_out"]] > 0
    assert diff.largest_addition()[:2] == (last, "feed-forward")


def test_the_output_is_read_in_blocks_without_keeping_the_logits(monkeypatch):
    monkeypatch.setattr(md, "ROW_BLOCK", 5)
    a, b = make("gpt2"), make("gpt2", seed=3)
    text = "the bank of the river and the money"
    trace_a, trace_b = a.trace(text), b.trace(text)
    assert trace_a.n_seq > md.ROW_BLOCK                  # more than one block
    diff = md.diff_traces(trace_a, trace_b)
    assert "logits" not in trace_a._stacked and "logits" not in trace_b._stacked
    whole = md.output_drift(trace_a.logits, trace_b.logits)
    # (a block's vocabulary product rounds as a product of its rows: float32 rounding apart)
    np.testing.assert_allclose(diff.output.kl_at, whole.kl_at, rtol=1e-5)
    np.testing.assert_array_equal(diff.output.top_a, whole.top_a)
    np.testing.assert_array_equal(diff.output.top_b, whole.top_b)
