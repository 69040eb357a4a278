"""The guided walks (resources/walks/*.json, core/analysis/walks.py): every walk runs start to end on the
built-in model and on every fixture family, each caption filled from that state's numbers; the
numbers that have an exact answer have it; a bad walk file or a caption naming a number no
readout gives is refused with one line."""
from __future__ import annotations

import re
import string
from dataclasses import replace
from pathlib import Path

import pytest

from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.seq2seq_loader import is_seq2seq_path
from transformer_stepper.core.analysis.walks import WalkError, fill_step
from transformer_stepper.io.walks import load_walks, read_walk, walk_extras

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# the walks run in the main window; an encoder–decoder opens in its own (ui/seq2seq/)
FAMILIES = sorted(p.name for p in FIXTURES.iterdir()
                  if (p / "config.json").is_file() and not is_seq2seq_path(str(p)))
TEXT = "The queen rode to the bank of the river and she was tired"
WALKS = load_walks()
EXTRAS = walk_extras()


def _run_all(model) -> list:
    shown = []
    for walk in WALKS:
        for index in range(len(walk.steps)):
            step = fill_step(model, walk, index, TEXT, EXTRAS)
            template = walk.steps[index].caption if step.applies else walk.steps[index].otherwise
            named = {name for _, name, _, _ in string.Formatter().parse(template) if name}
            assert named and named <= set(step.numbers), (walk.key, index)
            assert not re.search(r"\bnan\b|\binf\b", step.caption), (walk.key, index, step.caption)
            shown.append(step)
    return shown


def test_the_six_questions_are_there_with_four_to_eight_steps():
    assert len(WALKS) >= 6
    for walk in WALKS:
        assert 4 <= len(walk.steps) <= 8, walk.key
        assert walk.question.endswith("?")


def test_every_walk_runs_on_the_builtin_model_with_exact_answers():
    shown = {(s.walk.key, s.index): s for s in _run_all(load_model(None))}
    n = shown[("01-static-or-contextual", 0)].numbers
    assert n["lookup_difference"] == 0.0 and n["same_id_pairs"] == 1
    assert shown[("01-static-or-contextual", 2)].numbers["onehot_difference"] == 0.0
    # the hidden states separate: the last layer's pair cosine is below the entry's
    assert n["cos_last"] < n["cos_entry"]
    translator = shown[("01-static-or-contextual", 4)]           # the built-in translator, beside
    assert translator.applies and translator.state.translator
    # by Velan's rules: la noun adjective, "near" after its phrase as apud, the verb last
    assert translator.numbers["translation"] == "la viro olda la bordo ruga la rivo apud vidis ."
    assert (translator.numbers["verb"], translator.numbers["verb_reads"]) == ("vidis", "saw")
    assert translator.numbers["n_decoder_steps"] == len(translator.numbers["translation"].split()) + 1
    repeated = shown[("03-one-word-many-embeddings", 2)].numbers
    assert repeated["repeated_row_difference"] == 0.0 and repeated["repeated_entry_difference"] > 0.1
    weights = shown[("05-weighted-sum-keeps-sources", 0)]
    assert weights.numbers["top_source"] == "queen" and weights.state.selected == 11
    assert abs(weights.numbers["weight_sum"] - 1.0) < 1e-5
    short = shown[("05-weighted-sum-keeps-sources", 1)].numbers
    assert short["sum_difference"] < 1e-5 and short["n_keys"] == 12 <= short["limit_keys"] == 17
    assert "can be read back" in short["recovery"]
    other = shown[("05-weighted-sum-keeps-sources", 2)].numbers
    assert other["other_keys"] > 17 and other["other_difference"] < 1e-5 and other["other_change"] > 0.1
    assert "now its top" in other["other_verdict"]          # a weighting with another top source
    assert shown[("05-weighted-sum-keeps-sources", 5)].numbers["ablation_change"] > 0.0
    assert shown[("05-weighted-sum-keeps-sources", 6)].state.interventions == ()
    assert shown[("06-unseen-sentence", 1)].numbers["score_difference"] < 1e-4
    rotary = shown[("04-positions-added", 3)].numbers
    assert rotary["shift_spread"] < 1e-4 < rotary["key_only_spread"]
    training = shown[("02-where-embeddings-come-from", 1)].numbers
    # the lookup's gradient touches only the batch's ids; the tied head's every row
    assert training["lookup_rows"] <= training["batch_distinct_ids"] < training["train_vocab"]
    assert training["head_rows"] == training["train_vocab"]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_walk_runs_on_each_fixture_family(family):
    model = load_model(str(FIXTURES / family))
    for step in _run_all(model):
        if "lookup_difference" in step.numbers and step.numbers["same_id_pairs"]:
            assert step.numbers["lookup_difference"] == 0.0
        if "onehot_difference" in step.numbers:
            assert step.numbers["onehot_difference"] == 0.0
        # a largest difference of 0 is said as what it means, not "at most 0" / "to within 0"
        assert not re.search(r"(at most|to within) 0(?![.\d])", step.caption), step.caption
        if step.walk.key.startswith("06") and step.index == 4:
            assert step.applies == model.can_generate      # "needs a decoder" said on an encoder
            if not step.applies:
                assert "needs a decoder" in step.caption


@pytest.mark.minilm
def test_every_walk_runs_on_minilm(minilm_dir):
    _run_all(load_model(str(minilm_dir)))


def test_a_caption_naming_an_unknown_number_fails():
    walk = WALKS[0]
    broken = replace(walk, steps=(replace(walk.steps[0], caption="cosine {no_such_number:.3f}"),))
    with pytest.raises(WalkError, match="no_such_number"):
        fill_step(load_model(None), broken, 0, TEXT, EXTRAS)


@pytest.mark.parametrize("content, problem", [
    ("{", "not JSON"),
    ('{"question": "q?", "summary": "", "steps": []}', "steps"),
    ('{"question": "q?", "summary": "", "steps": [{"title": "t", "caption": "c", "readouts": ["nope"]}]}',
     "no readout named 'nope'"),
    ('{"question": "q?", "summary": "", "steps": [{"title": "t", "caption": "c", "state": {"layer": -1}}]}',
     "'layer'"),
    ('{"question": "q?", "summary": "", "steps": [{"title": "t", "caption": "c", "state": {"stage": "x"}}]}',
     "'stage'"),
])
def test_a_bad_walk_file_is_one_line_naming_it(tmp_path, content, problem):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ModelError) as info:
        read_walk(path)
    assert str(path) in str(info.value) and problem in str(info.value)
    assert "\n" not in str(info.value)


def _token_label(model, shown) -> str:
    from transformer_stepper.core.analysis.word_match import piece_text

    trace = model.trace(shown.state.text)
    return piece_text(trace.tokens[shown.state.selected])


def test_the_selected_token_is_the_one_the_caption_speaks_of():
    """Every step selects a token, and it is the caption's: walk 3 step 3 speaks of the repeated
    'the' (it kept the earlier selection, 'queen'); walk 6 step 5 of the last token, 'song' (it
    kept step 4's 'he')."""
    model = load_model(None)
    walks = {w.key: w for w in WALKS}
    for walk in WALKS:
        for index in range(len(walk.steps)):
            shown = fill_step(model, walk, index, TEXT, EXTRAS)
            assert shown.state.selected is not None, (walk.key, index)
    repeated = fill_step(model, walks["03-one-word-many-embeddings"], 2, TEXT, EXTRAS)
    assert repeated.state.selected == repeated.numbers["first_at"]
    assert _token_label(model, repeated) == repeated.numbers["repeated"]
    assert f"'{repeated.numbers['repeated']}'" in repeated.caption or repeated.numbers["repeated"] in repeated.caption
    predicted = fill_step(model, walks["06-unseen-sentence"], 4, TEXT, EXTRAS)
    trace = model.trace(predicted.state.text)
    assert predicted.state.selected == trace.n_seq - 1
    assert _token_label(model, predicted) == predicted.numbers["last_token"] == "song"
