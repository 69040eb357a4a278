"""Interventions in an encoder–decoder (core/model/seq2seq_interventions.py) and their difference at
every stage of both stacks (core/analysis/seq2seq_differences.py): an ablation bites first where it acts
and nowhere before; a step keeps the intervention; bad ones are one line."""
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.model.interventions import AblateHead
from transformer_stepper.core.analysis.seq2seq_differences import (
    seq2seq_differences,
    seq2seq_grids,
    translations)
from transformer_stepper.core.model.seq2seq_interventions import (
    InStack,
    NoSourcePositions,
    describe_all,
    parse)
from transformer_stepper.io.loader import load_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def t5():
    return load_model(FIXTURES / "t5_tiny")


def test_a_cross_attention_ablation_leaves_the_encoder_and_bites_at_its_layer(t5):
    clean = t5.trace("The bank of the river.", "Das Ufer des")
    intervened = t5.intervene(clean, [InStack("cross", AblateHead(1, 2))])
    grids = seq2seq_grids(seq2seq_differences(clean, intervened), t5.config)
    assert np.nansum(grids["Encoder"].values) == 0                    # the encoder is untouched
    decoder = grids["Decoder"]
    cross = decoder.stages.index("cross_attention")
    assert np.all(np.nan_to_num(decoder.values[:, 0]) == 0)           # nothing in layer 0
    assert decoder.values[cross, 1] > 0
    before = [decoder.stages.index(k) for k in ("qkv", "scores", "softmax", "weighted_sum")]
    assert np.all(decoder.values[before, 1] == 0)                     # self-attention before it: clean
    assert decoder.values[decoder.stages.index("feed_forward"), 1] > 0   # and it spreads after
    np.testing.assert_array_equal(intervened.decoder.layer("cross_head_outputs", 1)[2], 0)


def test_no_source_positions_removes_t5s_encoder_bias_only(t5):
    clean = t5.trace("The bank of the river.", "Das")
    intervened = t5.intervene(clean, [NoSourcePositions()])
    assert "encoder_position_bias" not in intervened.encoder.arrays
    assert "decoder_position_bias" in intervened.decoder.arrays
    q, k = intervened.encoder.layer("q", 0), intervened.encoder.layer("k", 0)
    np.testing.assert_allclose(intervened.encoder.layer("scores", 0), q @ k.transpose(0, 2, 1), atol=1e-5)
    grids = seq2seq_grids(seq2seq_differences(clean, intervened), t5.config)
    assert grids["Encoder"].values[grids["Encoder"].stages.index("scores"), 0] > 0


def test_a_step_keeps_the_intervention_and_equals_a_whole_pass(t5):
    ablate = [InStack("decoder", AblateHead(0, 1))]
    trace = t5.trace("The bank of the river.", "Das", interventions=ablate)
    stepped = t5.extend(trace, [7])
    whole = t5.trace("The bank of the river.", target_ids=stepped.decoder.input_ids[1:], interventions=ablate)
    assert stepped.interventions == tuple(ablate) and stepped.decoder.computed_rows == 1
    np.testing.assert_allclose(stepped.logits, whole.logits, atol=1e-5, rtol=0)


def test_translations_clean_and_intervened(t5):
    result = translations(t5, "The bank of the river.", [InStack("cross", AblateHead(0, 0))], 8)
    assert len(result.clean_ids) <= 8 and result.clean_text == "".join(
        t5.target_tokenizer.continuation([], list(result.clean_ids))).strip()
    same = translations(t5, "The bank of the river.", [], 8)
    assert same.first_difference is None and same.clean_ids == same.intervened_ids


@pytest.mark.parametrize("item, problem", [
    (InStack("cross", AblateHead(2, 0)), "layer 2 is out of range"),
    (InStack("encoder", AblateHead(0, 4)), "head 4 is out of range"),
    (InStack("decoder", AblateHead(0, 0, "mean")), "ablated with zeros"),
    (InStack("middle", AblateHead(0, 0)), "unknown encoder–decoder intervention"),
    (AblateHead(0, 0), "unknown encoder–decoder intervention")])
def test_bad_interventions_are_one_line(t5, item, problem):
    with pytest.raises(ModelError, match=problem):
        t5.trace("The bank.", interventions=[item])


def test_the_cli_spelling():
    assert parse("cross:1:2") == InStack("cross", AblateHead(1, 2))
    assert describe_all([parse("encoder:0:3"), NoSourcePositions()]) == \
        "[encoder self-attention: ablate layer 0 head 3 (zero)] · [no source positions]"
    with pytest.raises(ModelError, match="STACK:LAYER:HEAD"):
        parse("cross:1")


def test_a_generated_clean_trace_is_compared_as_a_whole_pass(t5):
    from transformer_stepper.core.analysis.seq2seq_differences import intervene_and_compare
    from transformer_stepper.core.trace.seq2seq_generate import generate

    grown = generate(t5, t5.trace("The bank of the river."), 5)[-1]
    clean, _, differences = intervene_and_compare(t5, grown, [InStack("cross", AblateHead(1, 2))])
    assert clean.decoder.computed_rows == clean.decoder.n_seq
    grid = seq2seq_grids(differences, t5.config)["Decoder"]
    before = [grid.stages.index(k) for k in ("qkv", "scores", "softmax", "weighted_sum", "output_projection")]
    assert np.all(grid.values[before, 1] == 0)        # exactly 0 before the ablated head, not rounding


def test_a_known_clean_translation_is_reused(t5):
    ablate = [InStack("cross", AblateHead(0, 0))]
    fresh = translations(t5, "The bank of the river.", ablate, 8)
    reused = translations(t5, "The bank of the river.", ablate, 8, clean=(fresh.clean_ids, fresh.clean_text))
    assert reused == fresh
    marked = translations(t5, "The bank of the river.", ablate, 8, clean=((5,), "given"))
    assert marked.clean_text == "given" and marked.intervened_ids == fresh.intervened_ids
