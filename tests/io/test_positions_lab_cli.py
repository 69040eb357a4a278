"""`transformer-stepper positions-lab`: bad output folders and variants are refused before any
training, one line each; a short run writes each variant's folder (which opens as a model,
with its curve.csv), results.csv and the figures (the Positions tab's, rendered offscreen)."""
import csv

from transformer_stepper.cli import main
from transformer_stepper.io.loader import load_model


def test_bad_input_is_one_line_before_any_training(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("mine")
    for argv, words in (
            (["--out", str(taken)], "not empty"),
            (["--out", str(tmp_path / "no" / "lab")], "does not exist"),
            (["--out", str(tmp_path / "lab"), "--variant", "sideways"], "not one of"),
            (["--out", str(tmp_path / "lab"), "--steps", "0"], "at least 1")):
        assert main(["positions-lab", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err and err.count("\n") == 1
    assert (taken / "x").read_text() == "mine" and not (tmp_path / "lab").exists()


def test_a_short_run_writes_the_models_and_the_table(tmp_path, capsys):
    out = tmp_path / "lab"
    assert main(["positions-lab", "--out", str(out), "--steps", "2", "--variant", "none",
                 "--variant", "concat"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["concat", "none", "positions-curves.png",
                                                     "positions-interference-concat.png",
                                                     "results.csv", "results.json"]
    assert sorted(p.name for p in (out / "none").iterdir()) == ["config.json", "curve.csv", "model.safetensors",
                                                                "recipe.json", "tokenizer.json"]
    assert (out / "positions-curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (out / "results.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["variant"] for row in rows] == ["none", "concat"]
    assert load_model(str(out / "concat")).config.position == "concat"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary folder left"
