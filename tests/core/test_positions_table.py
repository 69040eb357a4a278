"""The positions lab's table over seeds: mean and min–max per variant, and ties where the seed
ranges overlap."""
import pytest

from transformer_stepper.core.training import positions_table as table


def rows(values):
    """{variant: [loss per seed]} -> results.csv-like rows"""
    return [{"variant": v, "seed": s, "heldout_loss": loss, "mean_abs_cos": None}
            for v, losses in values.items() for s, loss in enumerate(losses)]


def test_spread_is_mean_and_range_of_present_values():
    s = table.spread([0.8, None, 0.9, float("nan"), 1.0])
    assert (s.mean, s.low, s.high, s.n) == (pytest.approx(0.9), 0.8, 1.0, 3)
    assert table.spread([None]) is None


def test_summary_keeps_variant_order_and_missing_measures():
    summary = table.summarize(rows({"b": [1.0, 2.0], "a": [3.0]}), ["heldout_loss", "mean_abs_cos"])
    assert list(summary) == ["b", "a"]
    assert summary["b"]["heldout_loss"].mean == 1.5 and summary["a"]["heldout_loss"].n == 1
    assert summary["b"]["mean_abs_cos"] is None


def test_overlapping_ranges_tie_with_the_best_and_separate_ones_are_apart():
    summary = table.summarize(rows({"best": [0.78, 0.79], "close": [0.785, 0.80], "far": [0.81, 0.82]}),
                              ["heldout_loss"])
    assert table.standing(summary, "heldout_loss") == {"best": "best", "close": "tie", "far": "apart"}
    # higher is better for accuracy: the same numbers rank the other way round
    acc = [{"variant": r["variant"], "heldout_accuracy": r["heldout_loss"]}
           for r in rows({"best": [0.78, 0.79], "close": [0.785, 0.80], "far": [0.81, 0.82]})]
    assert table.standing(table.summarize(acc, ["heldout_accuracy"]), "heldout_accuracy") == \
        {"far": "best", "close": "apart", "best": "apart"}
