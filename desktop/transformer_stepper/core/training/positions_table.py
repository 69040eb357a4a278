"""The positions laboratory's table over seeds: per variant and measure, the mean and the range
(min–max) over the seeds, and which differences the seeds cannot tell apart.

Honesty about seeds (issue 13): with three seeds a mean is not a result. Two variants are
*tied* on a measure when their seed ranges overlap; the best variant is the one with the best
mean, and every variant whose range overlaps the best's is tied with it. A variant is *apart*
only when its whole range lies on the worse side of the best's whole range."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

PHENOMENA = ("pronoun", "agreement", "ambiguous", "closing")
# measure -> True when higher is better, False when lower is; measures not here are not ranked
RANKED = {"heldout_loss": False, "heldout_accuracy": True,
          **{name: True for name in PHENOMENA}}


@dataclass(frozen=True)
class Spread:
    """One measure of one variant over its seeds."""
    mean: float
    low: float
    high: float
    n: int                         # seeds with a value

    def overlaps(self, other: "Spread") -> bool:
        return self.low <= other.high and other.low <= self.high

    @property
    def width(self) -> float:
        return self.high - self.low


def spread(values: Sequence[Optional[float]]) -> Optional[Spread]:
    """Spread of the values that are present (None and NaN skipped); None if there are none."""
    present = np.array([float(v) for v in values if v is not None and np.isfinite(float(v))])
    if not len(present):
        return None
    return Spread(float(present.mean()), float(present.min()), float(present.max()), len(present))


def summarize(rows: Sequence[Mapping], measures: Sequence[str]) -> dict[str, dict[str, Optional[Spread]]]:
    """rows (one per variant and seed, as results.csv) -> {variant: {measure: Spread or None}},
    variants in the order they first appear."""
    variants: dict[str, list[Mapping]] = {}
    for row in rows:
        variants.setdefault(str(row["variant"]), []).append(row)
    return {variant: {m: spread([r.get(m) for r in seeds]) for m in measures}
            for variant, seeds in variants.items()}


def standing(summary: Mapping[str, Mapping[str, Optional[Spread]]], measure: str) -> dict[str, str]:
    """{variant: "best" | "tie" | "apart"} on a ranked measure (see RANKED); variants without a
    value are left out. "tie": its seed range overlaps the best variant's range."""
    higher = RANKED[measure]
    present = {v: s[measure] for v, s in summary.items() if s.get(measure) is not None}
    if not present:
        return {}
    best = max(present, key=lambda v: present[v].mean if higher else -present[v].mean)
    return {v: "best" if v == best else "tie" if s.overlaps(present[best]) else "apart"
            for v, s in present.items()}


def seeds_in(rows: Sequence[Mapping]) -> list[int]:
    return sorted({int(r["seed"]) for r in rows if r.get("seed") is not None})
