"""`transformer-stepper compare`: every Compare figure and compare.csv, whose cosines are those
of each sentence's own trace; bad input is one `error:` line and exit status 2."""
import csv

import numpy as np
import pytest
from PySide6.QtGui import QImage

from transformer_stepper.cli import main
from transformer_stepper.io.loader import load_model
from transformer_stepper.ui.compare import presets

from .conftest import builtin_model_or_skip

BANK = presets.BUILTIN[0]


def test_compare_command_writes_every_figure_and_the_csv(qapp, capsys, tmp_path):
    builtin_model_or_skip()
    out = tmp_path / "compare"
    texts = list(BANK.sentences[:2]) + ["The dog gave a loud bark at the cat .", BANK.sentences[2]]
    argv = ["compare", "--word", "bank", "--out", str(out), "--layer", "1", "--head", "1"]
    for text in texts:
        argv += ["--text", text]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "warning: sentence 3 ('The dog gave a loud bark at the cat .'): no 'bank' in it" in captured.err
    files = sorted(p.name for p in out.iterdir())
    assert files == ["compare-1-lookup_row.png", "compare-2-entry.png",
                     "compare-3-cosine_across_layers.png", "compare-4-map.png",
                     "compare-5-nearest_words.png", "compare-6-attention-L1H1.png", "compare.csv"]
    assert QImage(str(out / "compare-4-map.png")).size().width() == 800
    model = load_model()
    compared = [t for t in texts if "bank" in t]
    states = [model.trace(t).hidden_states for t in compared]
    where = [model.trace(t).tokens.index("bank") for t in compared]
    with open(out / "compare.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["state"] for r in rows] == ["embedding", "layer 0", "layer 1", "layer 2"]
    numbers = [1, 2, 4]                  # sentence 3 is left out; the others keep their numbers
    assert list(rows[0]) == ["index", "state", "cos_S1_S2", "cos_S1_S4", "cos_S2_S4",
                             "cos_S1_to_own_state0", "cos_S2_to_own_state0", "cos_S4_to_own_state0"]
    for index, row in enumerate(rows):
        for i, j in [(0, 1), (0, 2), (1, 2)]:
            a, b = states[i][index, where[i]].astype(float), states[j][index, where[j]].astype(float)
            want = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
            assert float(row[f"cos_S{numbers[i]}_S{numbers[j]}"]) == pytest.approx(want, abs=1e-12)
        for i in range(3):
            a, b = states[i][index, where[i]].astype(float), states[i][0, where[i]].astype(float)
            want = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
            assert float(row[f"cos_S{numbers[i]}_to_own_state0"]) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("extra, message", [
    ([], "1 non-empty --text"),
    (["--text", "x"] * 8, "9 sentences"),
    (["--text", "The dog gave a bark ."], "in 1 of the 2 sentences"),
    (["--text", "the bank .", "--layer", "7"], "--layer 7"),
    (["--text", "the bank .", "--scale", "99"], "--scale 99"),
])
def test_compare_command_bad_input_is_one_line(qapp, capsys, tmp_path, extra, message):
    builtin_model_or_skip()
    code = main(["compare", "--word", "bank", "--text", "He sat on the bank .", "--out",
                 str(tmp_path / "o"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
