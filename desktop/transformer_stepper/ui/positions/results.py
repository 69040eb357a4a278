"""What the Positions table shows: per variant and measure the mean and min–max over the seeds
of results.csv (core.training.positions_table), how it stands against the best variant (best,
tie, apart), and the opened model's interference measures. Plain data and text, no widgets:
the table, its CSV export and the explanation all read it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...core.training import positions_table
from ...core.training.positions_table import Spread
from ...io.positions_lab import LabFolder


@dataclass(frozen=True)
class Measure:
    key: str                  # results.csv column
    title: str                # column header
    kind: str                 # "loss", "percent", "share", "cos", "r2"
    tip: str


MEASURES = (
    Measure("heldout_loss", "held-out loss", "loss", "cross-entropy on 2,000 held-out passages (nats/token)"),
    Measure("heldout_accuracy", "accuracy", "percent", "next-token accuracy on the held-out passages"),
    Measure("pronoun", "pronoun", "percent", "the word after a pronoun, where only its antecedent tells"),
    Measure("agreement", "agreement", "percent", "verb agreement with a subject earlier in the clause"),
    Measure("ambiguous", "ambiguous", "percent", "the sense of an ambiguous word (bank, ...) from context"),
    Measure("closing", "closing", "percent", "closing a clause opened earlier"),
    Measure("e_variance_in_p_subspace", "E var. in P's subspace", "share",
            "share of E's variance in the span of P's top directions (90 % of P); "
            "in brackets: what a random subspace as wide would hold"),
    Measure("mean_abs_cos", "mean |cos(e, p)|", "cos", "mean |cosine| of every token row with every position vector"),
    Measure("probe_r2_last_layer", "position probe R²", "r2",
            "R² of a linear probe predicting the position from the last layer's output"),
)
INTERFERENCE = ("e_variance_in_p_subspace", "mean_abs_cos")


def number(kind: str, value: float) -> str:
    if kind == "percent":
        return f"{100 * value:.1f}"
    if kind == "r2":
        return f"{value:.2f}"
    return f"{value:.3f}"


def cell_parts(kind: str, spread: Optional[Spread], random: Optional[Spread] = None) -> tuple[str, str]:
    """('0.821', '0.797–0.868'): the mean (with ' · random X' for E's share in P's subspace) and
    the range over the seeds ('' for one seed or no spread); None: ('—', '')."""
    if spread is None:
        return "—", ""
    first = number(kind, spread.mean)
    if random is not None and spread.high > 0:
        first += f" · random {number(kind, random.mean)}"
    low, high = number(kind, spread.low), number(kind, spread.high)
    return first, f"{low}–{high}" if spread.n > 1 and low != high else ""


def cell_text(kind: str, spread: Optional[Spread]) -> str:
    """'0.821 (0.797–0.868)'; one seed or no spread: the value alone; None: '—'."""
    first, second = cell_parts(kind, spread)
    return f"{first} ({second})" if second else first


@dataclass
class LabTable:
    lab: LabFolder
    seeds: list[int]
    summary: dict[str, dict[str, Optional[Spread]]]       # variant -> measure -> Spread
    standings: dict[str, dict[str, str]]                   # measure -> variant -> best/tie/apart

    @property
    def variants(self) -> list[str]:
        return list(self.summary)

    def spread(self, variant: str, key: str) -> Optional[Spread]:
        return self.summary.get(variant, {}).get(key)

    def parts(self, variant: str, measure: Measure) -> tuple[str, str]:
        random = self.spread(variant, "random_share") if measure.key == "e_variance_in_p_subspace" else None
        return cell_parts(measure.kind, self.spread(variant, measure.key), random)

    def standing(self, variant: str, key: str) -> str:
        return self.standings.get(key, {}).get(variant, "")

    def best(self, key: str) -> Optional[str]:
        return next((v for v, s in self.standings.get(key, {}).items() if s == "best"), None)

    def tied_with_best(self, key: str) -> list[str]:
        return [v for v, s in self.standings.get(key, {}).items() if s == "tie"]


def build_table(lab: LabFolder) -> LabTable:
    keys = [m.key for m in MEASURES] + ["random_share"]
    summary = positions_table.summarize(lab.rows, keys)
    standings = {key: positions_table.standing(summary, key) for key in positions_table.RANKED}
    return LabTable(lab, positions_table.seeds_in(lab.rows), summary, standings)


def your_model_text(measure: Measure, interference: Optional[dict]) -> str:
    """The opened model's cell: interference measures only (it was not trained here)."""
    if measure.key not in INTERFERENCE or interference is None:
        return "—"
    value = interference[measure.key]
    if measure.key == "e_variance_in_p_subspace" and interference.get("p_rank") is not None:
        return f"{number(measure.kind, value)} · random {number(measure.kind, interference['random_share'])}"
    return number(measure.kind, value)


def summary_rows(table: LabTable, your_model: Optional[tuple[str, dict]] = None) -> list[dict]:
    """The table as long-format rows (one per variant and measure) for CSV: mean, min, max,
    how many seeds, standing; the opened model's interference measures as rows of one value."""
    rows = []
    for variant in table.variants:
        for measure in MEASURES + (Measure("random_share", "", "share", ""),):
            s = table.spread(variant, measure.key)
            if s is None:
                continue
            rows.append({"variant": variant, "measure": measure.key, "mean": round(s.mean, 6),
                         "min": s.low, "max": s.high, "seeds": s.n,
                         "standing": table.standing(variant, measure.key)})
    if your_model is not None and your_model[1] is not None:
        name, interference = your_model
        for key in INTERFERENCE + ("random_share",):
            rows.append({"variant": f"your model: {name}", "measure": key, "mean": interference[key],
                         "min": interference[key], "max": interference[key], "seeds": "", "standing": ""})
    return rows
