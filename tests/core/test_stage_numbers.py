"""A stage's number is its place in the stage list, not a number kept by hand beside it. The
Router (a mixture-of-experts model's alone) does not shift a dense model's numbers: it takes the
number of the stage it comes before, and for an MoE model the stages after it count on by one."""
from tests.builders import tiny_config
from transformer_stepper.core.model import stages
from transformer_stepper.core.model.seq2seq_stages import CROSS_ATTENTION
from transformer_stepper.core.model.stages import STAGES, Stage, _numbered, available_stages


def test_numbers_are_the_places_in_the_list_of_the_stages_every_model_has():
    every = [s for s in STAGES if not s.needs_experts]
    assert [s.number for s in every] == list(range(1, len(every) + 1))
    assert stages.stage("router").number == stages.ROUTER_NUMBER == stages.stage("feed_forward").number


def test_the_stepper_order_of_the_design():
    titles = {s.number: s.title for s in STAGES if not s.needs_experts}
    assert (titles[1], titles[2], titles[7], titles[11], titles[13]) == (
        "Tokenize", "Embedding lookup", "Softmax", "Layer output", "Logit lens")


def test_a_stage_added_to_the_list_renumbers_those_after_it():
    extra = Stage("extra", "Extra", per_layer=True)
    at = [s.key for s in STAGES].index("output_projection")        # before the output projection
    grown = _numbered(*STAGES[:at], extra, *STAGES[at:])
    by_key = {s.key: s.number for s in grown}
    assert by_key["extra"] == stages.stage("output_projection").number
    assert by_key["output_projection"] == stages.stage("output_projection").number + 1
    assert by_key["logit_lens"] == stages.stage("logit_lens").number + 1
    assert by_key["softmax"] == stages.stage("softmax").number      # those before keep theirs


def test_a_dense_model_lists_no_router_and_an_moe_model_counts_on_after_it():
    dense = tiny_config("gpt2")
    moe = dense.replace(n_expert=4, n_expert_used=2, gated_mlp=True)
    dense_list = available_stages(dense)
    assert "router" not in [s.key for s in dense_list]
    assert [s.number_for(dense) for s in dense_list] == list(range(1, len(dense_list) + 1))
    moe_list = available_stages(moe)
    keys = [s.key for s in moe_list]
    assert keys.index("router") == keys.index("feed_forward") - 1
    assert [s.number_for(moe) for s in moe_list] == list(range(1, len(moe_list) + 1))


def test_cross_attention_takes_the_number_of_the_output_projection_it_follows():
    assert CROSS_ATTENTION.number == stages.stage("output_projection").number
