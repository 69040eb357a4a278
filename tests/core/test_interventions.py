"""Interventions change the one forward pass: what they promise holds at every stage, lazily
computed layers get them too, the clean trace is untouched, bad ones are one line."""
import numpy as np
import pytest

from tests.core.test_architectures import make as make_llama
from tests.core.test_forward import make_model
from transformer_stepper import AblateHead, HeadTemperature, NoPositions, ShufflePositions, SwapEmbedding
from transformer_stepper.core.model import ops
from transformer_stepper.core.model.errors import ModelError

TEXT = "the bank of the river and the money"


@pytest.mark.parametrize("make", [lambda: make_model("gpt2"), lambda: make_model("bert"), make_llama])
def test_zero_ablation_zeroes_the_head_output_and_changes_what_follows(make):
    model = make()
    clean = model.trace(TEXT)
    ablated = model.trace(TEXT, interventions=[AblateHead(layer=1, head=2)])
    assert np.all(ablated.layer("head_outputs", 1)[2] == 0)
    np.testing.assert_array_equal(ablated.layer("attn_weights", 1), clean.layer("attn_weights", 1))
    np.testing.assert_array_equal(ablated.hidden_states[:2], clean.hidden_states[:2])
    assert not np.allclose(ablated.hidden_states[2], clean.hidden_states[2])
    # the clean trace is untouched and says it is clean
    assert clean.interventions == () and ablated.interventions == (AblateHead(1, 2),)
    np.testing.assert_array_equal(model.trace(TEXT).hidden_states, clean.hidden_states)


def test_lazily_computed_layers_get_the_intervention_too():
    model = make_model("gpt2")
    trace = model.trace(TEXT, interventions=[AblateHead(0, 1, "mean")])
    outputs = trace.layer("head_outputs", 0)              # computed now, from the stored input
    np.testing.assert_allclose(outputs[1], np.broadcast_to(outputs[1][0], outputs[1].shape))
    np.testing.assert_array_equal(trace.layer("layer_out", 0), trace.residual["layer_out"][0])


def test_head_temperature_is_softmax_of_scores_over_t():
    model = make_model("gpt2")
    trace = model.trace(TEXT, interventions=[HeadTemperature(0, 3, 4.0)])
    scores = trace.layer("scores", 0)[3]
    np.testing.assert_allclose(trace.layer("attn_weights", 0)[3], ops.softmax(scores / np.float32(4)),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("make", [lambda: make_model("gpt2"), lambda: make_model("sinusoidal"), make_llama])
def test_no_positions_removes_position_information(make):
    model = make()
    trace = model.trace(TEXT, interventions=[NoPositions()])
    if model.config.position == "rotary":
        assert "rope_angles" not in trace.arrays and "q_unrotated" not in trace.layer_names()
    else:
        assert np.all(trace["position_embeddings"] == 0)
    # without positions (and without a causal mask) attention sees a set: permuting the
    # tokens permutes the outputs
    if not model.config.causal:
        ids = trace.input_ids
        order = np.r_[0, np.arange(1, len(ids) - 1)[::-1], len(ids) - 1]
        from transformer_stepper.core.model.tokenize import Encoded
        permuted = model.trace_encoded(Encoded(tokens=tuple(trace.tokens[i] for i in order), input_ids=ids[order],
                                               token_type_ids=np.zeros(len(ids), np.int64), offsets=trace.offsets[order],
                                               special_tokens_mask=trace.special_tokens_mask[order], truncated=False),
                                       interventions=[NoPositions()])
        np.testing.assert_allclose(permuted.hidden_states[-1], trace.hidden_states[-1][order], atol=1e-4)


def test_shuffled_positions_and_swapped_rows():
    model = make_model("gpt2")
    clean = model.trace(TEXT)
    shuffled = model.trace(TEXT, interventions=[ShufflePositions(seed=1)])
    order = np.random.default_rng(1).permutation(clean.n_seq)
    np.testing.assert_array_equal(shuffled["position_embeddings"], clean["position_embeddings"][order])
    swapped = model.trace(TEXT, interventions=[SwapEmbedding(position=2, token_id=7)])
    np.testing.assert_array_equal(swapped["token_embeddings"][2], model.params["wte"][7])
    np.testing.assert_array_equal(swapped["token_embeddings"][3], clean["token_embeddings"][3])
    assert swapped.to_dict()["interventions"].tolist() == ["position 2 looked up as token 7"]


@pytest.mark.parametrize("bad, message", [
    (AblateHead(5, 0), "layer 5 is out of range"), (AblateHead(0, 9), "head 9 is out of range"),
    (SwapEmbedding(99, 1), "position 99 is outside"), (SwapEmbedding(0, 10**6), "token id 1000000 is outside"),
    (HeadTemperature(0, 0, 0.0), "temperature must be positive"), ("drop everything", "unknown intervention"),
])
def test_bad_interventions_are_one_line_and_the_clean_trace_still_works(bad, message):
    model = make_model("gpt2")
    with pytest.raises(ModelError, match=message):
        model.trace(TEXT, interventions=[bad])
    assert model.trace(TEXT).interventions == ()


@pytest.mark.parametrize("make", [lambda: make_model("gpt2"), lambda: make_model("bert"), make_llama])
@pytest.mark.parametrize("chosen", [[AblateHead(1, 2)], [HeadTemperature(1, 0, 3.0), AblateHead(1, 1, "mean")],
                                    [AblateHead(0, 3)], [NoPositions()], [SwapEmbedding(2, 7), AblateHead(1, 0)]])
def test_intervening_on_a_clean_trace_equals_tracing_intervened(make, chosen):
    # heads only: the layers before the first intervened one are taken from the clean trace
    model = make()
    clean = model.trace(TEXT)
    expected = model.trace(TEXT, interventions=chosen)
    for detail_layers in ((), tuple(range(model.config.n_layer))):
        got = model.intervene(clean, chosen, detail_layers)
        assert got.interventions == expected.interventions and got.tokens == clean.tokens
        assert sorted(got.arrays) == sorted(expected.arrays)
        for name in expected.arrays:
            np.testing.assert_array_equal(got.arrays[name], expected.arrays[name], err_msg=name)
        for layer in range(model.config.n_layer):
            assert set(got.detail(layer)) == set(expected.detail(layer))
            for name, value in expected.detail(layer).items():
                np.testing.assert_array_equal(got.layer(name, layer), value, err_msg=f"{name} {layer}")
    assert clean.interventions == ()
