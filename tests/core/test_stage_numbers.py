"""A stage's number is its place in the stage list, not a number kept by hand beside it."""
from transformer_stepper.core.model import stages
from transformer_stepper.core.model.seq2seq_stages import CROSS_ATTENTION
from transformer_stepper.core.model.stages import STAGES, Stage, _numbered


def test_numbers_are_the_places_in_the_list():
    assert [s.number for s in STAGES] == list(range(1, len(STAGES) + 1))


def test_the_stepper_order_of_the_design():
    titles = {s.number: s.title for s in STAGES}
    assert (titles[1], titles[2], titles[7], titles[11], titles[13]) == (
        "Tokenize", "Embedding lookup", "Softmax", "Layer output", "Logit lens")


def test_a_stage_added_to_the_list_renumbers_those_after_it():
    extra = Stage("router", "Router", per_layer=True)
    at = stages.stage("feed_forward").number - 1          # before the feed-forward
    grown = _numbered(*STAGES[:at], extra, *STAGES[at:])
    by_key = {s.key: s.number for s in grown}
    assert by_key["router"] == 10
    assert by_key["feed_forward"] == 11 and by_key["logit_lens"] == 14
    assert by_key["softmax"] == stages.stage("softmax").number      # those before keep theirs


def test_cross_attention_takes_the_number_of_the_output_projection_it_follows():
    assert CROSS_ATTENTION.number == stages.stage("output_projection").number
