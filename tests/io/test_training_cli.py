"""`transformer-stepper train`: bad input ends in one line and status 2, an interrupted run
leaves no model folder, a finished run leaves one the loader opens. A small recipe keeps it fast."""
import json
import os

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.cli import main
from transformer_stepper.core.training import corpus
from transformer_stepper.core.training.recipe import Recipe
from transformer_stepper.cli import train as training_cli
from transformer_stepper.io import model_folder


@pytest.fixture(autouse=True)
def small_recipe(monkeypatch):
    """The real recipe's code path with a corpus small enough for a test."""
    small = Recipe(corpus=corpus.CorpusConfig(n_passages=400), n_heldout=40, batch_size=8)
    monkeypatch.setattr(training_cli, "Recipe", lambda: small)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize("steps", ["0", "-5"])
def test_zero_or_negative_steps(tmp_path, capsys, steps):
    assert main(["train", "--out", str(tmp_path / "m"), "--steps", steps]) == 2
    assert f"--steps must be a positive integer, got {steps}" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_negative_seed(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "m"), "--steps", "1", "--seed", "-1"]) == 2
    assert "--seed must be a non-negative integer" in one_error_line(capsys)


def test_missing_parent_folder(tmp_path, capsys):
    out = tmp_path / "no" / "such" / "m"
    assert main(["train", "--out", str(out), "--steps", "1"]) == 2
    assert f"{out.parent}: folder does not exist" in one_error_line(capsys)


def test_parent_is_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["train", "--out", str(tmp_path / "file" / "m"), "--steps", "1"]) == 2
    assert "not a folder" in one_error_line(capsys)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_parent(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert main(["train", "--out", str(locked / "m"), "--steps", "1"]) == 2
        assert "not writable" in one_error_line(capsys)
    finally:
        locked.chmod(0o700)


def test_an_existing_model_is_not_overwritten(tmp_path, capsys):
    out = tmp_path / "m"
    out.mkdir()
    (out / "config.json").write_text("{}")
    assert main(["train", "--out", str(out), "--steps", "1"]) == 2
    assert "exists and is not empty" in one_error_line(capsys)
    assert (out / "config.json").read_text() == "{}"
    (tmp_path / "plain").write_text("x")
    assert main(["train", "--out", str(tmp_path / "plain"), "--steps", "1"]) == 2
    assert "exists and is not a folder" in one_error_line(capsys)


@pytest.mark.parametrize("existing_empty_folder", [False, True])
def test_interruption_leaves_no_model_folder(tmp_path, capsys, monkeypatch, existing_empty_folder):
    out = tmp_path / "m"
    if existing_empty_folder:
        out.mkdir()
    printed = training_cli._Printer.__call__

    def ctrl_c_at_step_2(self, progress):   # Ctrl-C arrives while the progress line prints
        printed(self, progress)
        if progress.step == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(training_cli._Printer, "__call__", ctrl_c_at_step_2)
    assert main(["train", "--out", str(out), "--steps", "50"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "interrupted\n"
    assert "step     2/50" in captured.out and f"nothing was written to {out}" in captured.out
    assert [p.name for p in tmp_path.iterdir()] == (["m"] if existing_empty_folder else [])
    if existing_empty_folder:
        assert list(out.iterdir()) == []


def test_on_progress_sees_each_step_and_can_stop_it(tmp_path):
    seen = []

    def stop(progress):
        seen.append(progress.step)
        if progress.step == 3:
            raise KeyboardInterrupt

    args = type("Args", (), {"out": str(tmp_path / "m"), "steps": 10, "seed": None})()
    with pytest.raises(KeyboardInterrupt):
        training_cli.run_train(args, on_progress=stop)
    assert seen == [1, 2, 3] and list(tmp_path.iterdir()) == []


def test_a_finished_run_writes_a_model_the_loader_opens(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["train", "--out", str(out), "--steps", "2", "--seed", "3"]) == 0
    captured = capsys.readouterr()
    assert "step     1/2" in captured.out and "tokens/s" in captured.out
    assert "held-out next-token accuracy" in captured.out and f"wrote {out}" in captured.out
    assert sorted(p.name for p in out.iterdir()) == sorted(model_folder.MODEL_FILES
                                                           + (model_folder.HISTORY_FILE,))
    assert [p.name for p in tmp_path.iterdir()] == ["m"]      # no temporary folder left behind
    recipe = json.loads((out / "recipe.json").read_text())
    assert recipe["recipe"]["steps"] == 2 and recipe["recipe"]["seed"] == 3
    model = load_model(out)
    assert model.config.position == "sinusoidal" and model.config.causal and model.config.lm_head
    assert model.trace("The king sat on the bank.").tokens[0] == "[BOS]"


def test_the_quick_recipe_writes_its_history(tmp_path, capsys, monkeypatch):
    small = training_cli.QUICK.replace(corpus=corpus.CorpusConfig(n_passages=300), n_heldout=20,
                                       batch_size=8)
    monkeypatch.setattr(training_cli, "QUICK", small)
    out = tmp_path / "m"
    assert main(["train", "--out", str(out), "--recipe", "quick", "--steps", "9",
                 "--snapshots", "4"]) == 0
    assert "training the quick recipe" in capsys.readouterr().out
    with np.load(out / model_folder.HISTORY_FILE, allow_pickle=False) as history:
        assert history["steps"].tolist() == list(range(1, 10))
        assert len(history["losses"]) == 9 and np.all(np.isfinite(history["losses"]))
        assert 2 <= len(history["snapshot_steps"]) <= 4 and history["snapshot_steps"][-1] == 9
        assert history["snapshots"].shape[1:] == (len(history["vocabulary"]), 48)
        assert history["separation"].shape == history["snapshot_steps"].shape
        assert history["heldout_steps"][0] == 0 and history["heldout_steps"][-1] == 9
        assert float(history["unigram_loss"]) > 0
        assert history["vocabulary"][2] == "[BOS]" and history["classes"][2] == "special"
    assert load_model(out).config.d_model == 48


def test_too_few_snapshots(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "m"), "--snapshots", "1"]) == 2
    assert "--snapshots must be at least 2" in one_error_line(capsys)
