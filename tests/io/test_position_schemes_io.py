"""The project's own position schemes (concat, none; rotary too) load from its .npz and from
a model folder like the built-in model's (config.json + model.safetensors), and compute what
the core computes."""
import json

import numpy as np
import pytest

from tests.builders import random_params, tiny_config, wordpiece_tokenizer, write_npz_model
from transformer_stepper import load_model
from transformer_stepper.core.model.forward import forward
from transformer_stepper.core.training import corpus
from transformer_stepper.core.training.recipe import Recipe, TrainedModel
from transformer_stepper.io.model_folder import save_model_folder

SCHEMES = [dict(position="concat", d_position=8), dict(position="none"), dict(position="rotary"),
           dict(position="concat", d_position=4, tied_head=False)]


@pytest.mark.parametrize("changes", SCHEMES)
def test_npz_round_trip(tmp_path, changes):
    config = tiny_config("sinusoidal", **changes)
    params = random_params(config)
    model = load_model(write_npz_model(tmp_path / "m.npz", config, params, wordpiece_tokenizer()))
    assert model.config == config.replace(name="m")
    for name, value in params.items():
        assert model.params[name].tobytes() == value.tobytes()
    trace = model.trace("the bank")
    np.testing.assert_array_equal(trace.logits, forward(params, config, trace.input_ids)["logits"])


@pytest.mark.parametrize("changes", SCHEMES)
def test_model_folder_round_trip(tmp_path, changes):
    tokenizer = corpus.build_tokenizer()
    config = tiny_config("sinusoidal", n_vocab=tokenizer.get_vocab_size(with_added_tokens=True),
                         causal=True, **changes)
    params = random_params(config)
    save_model_folder(tmp_path, TrainedModel(config, params, tokenizer, Recipe(), {}))
    stored = json.loads((tmp_path / "config.json").read_text())["stepper_config"]
    assert stored["position"] == changes["position"]
    model = load_model(tmp_path)
    assert model.config == config.replace(name=model.config.name)
    trace = model.trace("The king sat on the bank.")
    np.testing.assert_array_equal(trace.logits, forward(params, config, trace.input_ids)["logits"])
    if config.position == "concat":
        assert trace["embedding_concat"].shape == (len(trace.input_ids), config.d_model)
        assert trace["token_embeddings"].shape[1] == config.d_token
