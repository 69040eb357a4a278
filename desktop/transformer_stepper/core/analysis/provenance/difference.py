"""Where does a difference A − B come from? The same value of two models' traces of the same
tokens (a second model opened against the open one), each taken apart by explain() into its
own arithmetic, side by side; where the value is a sum of products whose k-th summand means the
same in both (x[d]·W[d, u] of a linear map, q[c]·k[c] of a score, w_ik·v_k[c] of a head
output), the summands are paired and their differences ranked: which terms' difference is
largest. The paired differences add up to the difference of the two sums exactly (float64).

    d = explain_difference(model_a, trace_a, model_b, trace_b, "q", (layer, head, i, c))
    d.a, d.b            # the two Explanations
    d.difference        # traced A − traced B: the number the A − B figure shows there
    d.terms             # [(label, a_k, b_k, a_k − b_k)] largest |a_k − b_k| first (paired only)

A value no explainer takes apart (token ids, the experts a router chose) raises KeyError as
explain() does; an index outside either trace raises IndexError."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .explain import explain
from .terms import TOP_TERMS, Explanation, format_number


@dataclass(frozen=True)
class TermDifference:
    label: str
    a: float
    b: float

    @property
    def difference(self) -> float:
        return self.a - self.b


@dataclass(frozen=True)
class DifferenceExplanation:
    a: Explanation
    b: Explanation
    terms: tuple[TermDifference, ...]     # paired summands, largest |a − b| first (TOP_TERMS)
    rest: float                           # Σ (a_k − b_k) of the other paired summands
    n_terms: int                          # summands paired (0: not paired, see `unpaired`)
    unpaired: str                         # why the summands are not paired ("" when they are)

    @property
    def difference(self) -> float:
        """The traced A − B (float64 of the two float32 values)."""
        return float(self.a.traced) - float(self.b.traced)

    @property
    def terms_difference(self) -> float:
        """Σ_k (a_k − b_k) over every paired summand = A's Σ terms − B's Σ terms."""
        return self.a.terms_total - self.b.terms_total

    def text(self) -> str:
        lines = [f"A − B of {self.a.title}", f"  A: {format_number(self.a.traced)}   B: "
                 f"{format_number(self.b.traced)}   A − B: {format_number(self.difference)}"]
        if self.n_terms:
            lines.append(f"  {self.a.terms_label}: the {self.n_terms} summands paired, largest |a − b| first:")
            lines += [f"    {t.label:<34} {format_number(t.a):>14} {format_number(t.b):>14} "
                      f"{format_number(t.difference):>14}" for t in self.terms]
            if self.n_terms > len(self.terms):
                lines.append(f"    {'the other ' + str(self.n_terms - len(self.terms)) + ' summands':<34} "
                             f"{'':>14} {'':>14} {format_number(self.rest):>14}")
        else:
            lines.append(f"  {self.unpaired}")
        lines += ["", "A:", *("  " + line for line in self.a.text().splitlines()),
                  "", "B:", *("  " + line for line in self.b.text().splitlines())]
        return "\n".join(lines)


def pair_terms(a: Explanation, b: Explanation, top: int = TOP_TERMS
               ) -> tuple[tuple[TermDifference, ...], float, int, str]:
    """(the `top` paired summands by |a_k − b_k|, Σ of the others' differences, how many, why
    not paired or "")."""
    why = _unpaired(a, b)
    if why:
        return (), 0.0, 0, why
    sa, sb = np.asarray(a.summands, np.float64), np.asarray(b.summands, np.float64)
    with np.errstate(invalid="ignore"):
        differences = sa - sb
    order = np.argsort(-np.abs(np.nan_to_num(differences, nan=np.inf)), kind="stable")
    chosen = order[:top]
    terms = tuple(TermDifference(a.summand_label(int(k)), float(sa[k]), float(sb[k])) for k in chosen)
    return terms, float(differences[order[top:]].sum()), len(differences), ""


def _unpaired(a: Explanation, b: Explanation) -> str:
    if a.summands is None or b.summands is None:
        return (f"{a.terms_label or 'this value'}: its terms are not a sum whose k-th summand means the "
                "same in both models (a softmax's or a norm's depend on the whole row), so A's and B's "
                "arithmetic are shown side by side, unpaired")
    if len(a.summands) != len(b.summands) or a.terms_label != b.terms_label:
        return (f"the two models compute this value from different summands ({len(a.summands)} "
                f"'{a.terms_label}' in A, {len(b.summands)} '{b.terms_label}' in B): shown side by side")
    return ""


def explain_difference(model_a, trace_a, model_b, trace_b, name: str, index) -> DifferenceExplanation:
    """The value name[index] in both traces, explained and compared (see the module docstring)."""
    a = explain(model_a, trace_a, name, index)
    b = explain(model_b, trace_b, name, index)
    terms, rest, n_terms, why = pair_terms(a, b)
    return DifferenceExplanation(a, b, terms, rest, n_terms, why)


def largest(d: DifferenceExplanation) -> Optional[TermDifference]:
    """The paired summand whose difference is largest, or None (not paired)."""
    return d.terms[0] if d.terms else None
