"""Reading a positions-lab folder: results.csv, the variants' folders (shipped `<variant>/` or the
command's `<variant>-seed<S>/`), their curves; every problem named in one line."""
import json
import shutil

import numpy as np
import pytest

from transformer_stepper.core.model.errors import ModelError
from transformer_stepper.io.positions_lab import CURVE_FILE, read_lab_folder, read_results_csv
from transformer_stepper.io.resources import resources_dir

SHIPPED = resources_dir() / "positions"


def test_the_shipped_folder_reads_with_every_variant_and_its_curve():
    lab = read_lab_folder(SHIPPED)
    assert list(lab.variants) == ["sum_sinusoidal", "sum_learned", "concat", "rotary", "none"]
    assert len(lab.rows) == 15
    for variant in lab.variants.values():
        assert variant.folder == SHIPPED / variant.name and variant.seed == 0
        assert len(variant.curve["step"]) == 100 and np.isnan(variant.curve["heldout_loss"]).all()
    assert lab.variants["rotary"].result["interference"] is None


def test_seed_folders_and_a_missing_curve_csv(tmp_path):
    (tmp_path / "results.csv").write_bytes((SHIPPED / "results.csv").read_bytes())
    for variant in ("sum_sinusoidal", "sum_learned", "concat", "rotary", "none"):
        shutil.copytree(SHIPPED / variant, tmp_path / f"{variant}-seed0")
    (tmp_path / "concat-seed0" / CURVE_FILE).unlink()          # an older output: recipe.json's curve
    lab = read_lab_folder(tmp_path)
    concat = lab.variants["concat"]
    assert concat.folder.name == "concat-seed0"
    recorded = json.loads((SHIPPED / "concat" / "recipe.json").read_text())["result"]["curve"]
    np.testing.assert_array_equal(concat.curve["train_loss"], recorded["loss"])


def test_problems_are_named(tmp_path):
    with pytest.raises(ModelError, match="results.csv"):
        read_lab_folder(tmp_path)
    (tmp_path / "results.csv").write_text("variant,seed,heldout_loss\nconcat,0,abc\n")
    with pytest.raises(ModelError, match="line 2: heldout_loss = 'abc' is not a number"):
        read_results_csv(tmp_path / "results.csv")
    (tmp_path / "results.csv").write_text("variant,seed,heldout_loss\nconcat,0,0.8\n")
    with pytest.raises(ModelError, match="no model folder for variant 'concat'"):
        read_lab_folder(tmp_path)
