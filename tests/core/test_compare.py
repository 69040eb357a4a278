"""compare(): the same word in several sentences. Its numbers are the traces' own numbers;
the lookup row never changes; on the built-in model the senses of "bank" separate."""
import csv

import numpy as np
import pytest

from transformer_stepper import compare, load_model
from transformer_stepper.cli import main
from transformer_stepper.core.compare import find_word
from transformer_stepper.core.errors import ModelError

RIVER = "the queen sat on the bank of the river ."
MONEY = "the queen kept the gold in the bank with the clerk ."
RIVER_2 = "the king rested on the bank by the water ."


@pytest.fixture(scope="module")
def builtin():
    return load_model()


def cos(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_cosines_in_the_csv_are_the_traces_own(builtin, tmp_path, capsys):
    assert main(["compare", "--word", "bank", "--text", RIVER, "--text", MONEY, "--text", RIVER_2,
                 "--out", str(tmp_path / "out")]) == 0
    assert "identical (difference 0)" in capsys.readouterr().out
    with open(tmp_path / "out" / "compare.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["hidden_state", "cos s1-s2", "cos s1-s3", "cos s2-s3", "self s1", "self s2", "self s3"]
    traces = [builtin.trace(t) for t in (RIVER, MONEY, RIVER_2)]
    positions = [t.tokens.index("bank") for t in traces]
    vectors = [t.hidden_states[:, p] for t, p in zip(traces, positions)]
    assert len(rows) == builtin.config.n_layer + 2
    for index, row in enumerate(rows[1:]):
        expected = [cos(vectors[0][index], vectors[1][index]), cos(vectors[0][index], vectors[2][index]),
                    cos(vectors[1][index], vectors[2][index])]
        expected += [cos(v[index], v[0]) for v in vectors]
        np.testing.assert_allclose([float(x) for x in row[1:]], expected, rtol=1e-6, atol=1e-6)


def test_lookup_row_is_identical_and_the_senses_separate(builtin):
    result = compare(builtin, "bank", [RIVER, MONEY, RIVER_2])
    assert len({o.token_id for o in result.occurrences}) == 1
    assert not result.lookup_difference.any(), "the lookup row is the same in every sentence"
    across, within = result.pair_cosines[:, 0], result.pair_cosines[:, 1]   # river-money, river-river
    assert across[-1] < across[0] - 0.2, "the last layer separates the senses"
    assert within[-1] > across[-1] + 0.3, "the same sense stays together"


def test_words_are_found_on_pieces_and_bad_input_is_one_line(builtin, fixtures_dir):
    gpt2 = load_model(fixtures_dir / "gpt2_tiny_lm")
    trace = gpt2.trace("She went to the bank to deposit money.")
    position, split = find_word(trace, "bank")
    assert trace.tokens[position].lstrip("Ġ") == "bank" and not split
    result = compare(builtin, "bank", [RIVER, "the queen sat by the water .", MONEY, "   "])
    assert len(result.occurrences) == 2
    assert any("sentence 2" in p and "not among its tokens" in p for p in result.problems)
    with pytest.raises(ModelError, match="at most 8 sentences"):
        compare(builtin, "bank", [RIVER] * 9)
    with pytest.raises(ModelError, match="at least two sentences"):
        compare(builtin, "bank", [RIVER, "the queen sat by the water ."])
