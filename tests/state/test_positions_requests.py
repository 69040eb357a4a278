"""The Positions tab's measurement of the opened model (state/positions.py) on the
ManualScheduler: what it says while measuring, the latest model's result only, a measurement
dropped when the tab closes, and nothing started while the tab is hidden."""
from __future__ import annotations

import numpy as np
import pytest

from tests.builders import random_params, tiny_config, tokenizer_for, write_npz_model
from transformer_stepper import load_model
from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.core.training import positions_lab as lab
from transformer_stepper.state.positions import YourModelMeasurement


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("positions_models")
    out = {}
    for kind, seed in (("gpt2", 1), ("bert", 2), ("llama", 3)):
        config = tiny_config(kind).replace(name=f"tiny-{kind}")
        out[kind] = load_model(str(write_npz_model(folder / f"{kind}.npz", config,
                                                   random_params(config, seed=seed), tokenizer_for(kind))))
    return out


def measurement(scheduler):
    measuring = YourModelMeasurement(scheduler)
    heard = []
    measuring.events.changed.connect(heard.append)
    return measuring, heard


def test_a_model_is_said_computing_then_measured_with_the_workers_result(scheduler, models):
    measuring, heard = measurement(scheduler)
    gpt2 = models["gpt2"]
    measuring.measure(gpt2)
    assert [(s.name, s.state) for s in heard] == [("tiny-gpt2", "computing")]
    assert len(scheduler.jobs) == 1 and not measuring.stale
    scheduler.run_all()
    assert [(s.name, s.state) for s in heard] == [("tiny-gpt2", "computing"), ("tiny-gpt2", "measured")]
    expected = lab.model_interference(gpt2.params, gpt2.config)
    got = heard[-1].interference
    assert got["n_positions"] == expected["n_positions"] == gpt2.config.n_ctx
    assert got["n_tokens"] == expected["n_tokens"] == gpt2.config.n_vocab
    assert np.allclose(got["principal_angle_cosines"], expected["principal_angle_cosines"])
    assert got["rms_e"] == expected["rms_e"]
    assert measuring.your_model is heard[-1]


def test_only_the_latest_models_result_is_shown(scheduler, models):
    """Two models opened in a row: the first one's measurement lands after the second was
    asked for and is dropped, whichever finishes first."""
    for order in ((0, 1), (1, 0)):
        measuring, heard = measurement(scheduler)
        measuring.measure(models["gpt2"])
        measuring.measure(models["bert"])
        assert [(s.name, s.state) for s in heard] == [("tiny-gpt2", "computing"), ("tiny-bert", "computing")]
        jobs = list(scheduler.jobs)
        for index in order:
            scheduler.run_next(scheduler.jobs.index(jobs[index]))
        assert [(s.name, s.state) for s in heard[2:]] == [("tiny-bert", "measured")], order
        assert measuring.your_model.name == "tiny-bert"


def test_a_failure_is_said_only_for_the_latest_request(scheduler, models, monkeypatch):
    def broken(params, config):
        raise ModelError(f"no table for {config.name}")

    monkeypatch.setattr(lab, "model_interference", broken)
    measuring, heard = measurement(scheduler)
    measuring.measure(models["gpt2"])
    measuring.measure(models["bert"])
    scheduler.run_all()
    failed = [s for s in heard if s.state == "failed"]
    assert [(s.name, s.why) for s in failed] == [("tiny-bert", "no table for tiny-bert")]


def test_closing_the_tab_drops_a_measurement_on_its_way(scheduler, models):
    measuring, heard = measurement(scheduler)
    measuring.measure(models["gpt2"])
    measuring.drop()
    scheduler.run_all()
    assert [s.state for s in heard] == ["computing"]


def test_a_new_model_while_hidden_waits_for_the_tab_to_show(scheduler, models):
    measuring, heard = measurement(scheduler)
    measuring.measure(models["gpt2"])
    scheduler.run_all()
    measuring.model_changed(models["bert"], shown=False)
    assert measuring.stale and not scheduler.jobs and heard[-1].name == "tiny-gpt2"
    measuring.model_changed(models["bert"], shown=True)
    assert not measuring.stale and len(scheduler.jobs) == 1
    scheduler.run_all()
    assert (heard[-1].name, heard[-1].state) == ("tiny-bert", "measured")


def test_no_model_and_a_rotary_model_are_said_at_once_without_a_worker(scheduler, models):
    measuring, heard = measurement(scheduler)
    measuring.measure(models["gpt2"])          # on its way: made stale by what follows
    measuring.measure(models["llama"])
    assert (heard[-1].state, heard[-1].name) == ("without", "tiny-llama")
    assert "rotary" in heard[-1].why
    measuring.measure(None)
    assert heard[-1].state == "none" and heard[-1].name == ""
    scheduler.run_all()                        # the gpt2 measurement lands: stale
    assert heard[-1].state == "none"
