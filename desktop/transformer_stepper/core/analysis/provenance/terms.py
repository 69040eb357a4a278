"""The pieces of a provenance explanation (core/analysis/provenance/explain.py): terms, steps, the explanation
itself, and the one decomposition most of them share, a linear map's output."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np


TOP_TERMS = 8               # terms listed one by one; the rest are summed into one line


@dataclass(frozen=True)
class Term:
    """One summand: `label` (e.g. "q[3] · k[3]"), its factors and their product."""
    label: str
    factors: tuple[float, ...]
    value: float


@dataclass(frozen=True)
class Step:
    """One scalar operation on the way to the value: what it does and what it gives."""
    label: str
    value: float


@dataclass(frozen=True)
class Explanation:
    name: str                           # the trace array ("scores", "q", "ln_1_out", ...)
    index: tuple[int, ...]              # its indices (layer first for per-layer arrays)
    title: str                          # "score of query 2 'she' for key 0 'the', layer 0, head 1"
    formula: str                        # "s_ij = q_i · k_j / √d_head + mask_ij"
    operands: dict                      # name -> the vector or scalar the arithmetic reads
    terms: tuple[Term, ...]             # the largest summands by |value|
    rest: float                         # the other summands, summed
    n_terms: int                        # how many summands there are in all
    terms_total: float                  # Σ of every summand (= Σ terms + rest)
    terms_label: str                    # what the summands add up to ("q·k")
    steps: tuple[Step, ...]             # from the operands to the value; the last one is it
    value: float                        # recomputed here
    traced: float                       # the trace's own value
    python: str                         # recomputes `value` with the public API
    sources: tuple["Explanation", ...] = ()   # one level down (q before its rotation, ...)
    notes: tuple[str, ...] = field(default=())
    # every summand in index order (float64) and how the k-th reads, where the value is a sum of
    # products the same k names in any model of this shape: two models' explanations pair them
    # (core/analysis/provenance/difference.py); None where the terms are not such a sum
    summands: Optional[np.ndarray] = field(default=None, compare=False, repr=False)
    summand_label: Optional[Callable[[int], str]] = field(default=None, compare=False, repr=False)

    @property
    def error(self) -> float:
        """|recomputed − traced| (0 when both are the same infinity)."""
        if self.value == self.traced:
            return 0.0
        return abs(self.value - self.traced)

    def matches(self, tolerance: float = 1e-5) -> bool:
        return bool(np.isclose(self.value, self.traced, rtol=tolerance, atol=tolerance))

    def text(self) -> str:
        """Plain text: title, formula, terms, steps (what "copy" and a terminal show)."""
        lines = [self.title, f"  {self.formula}"]
        if self.terms:
            lines.append(f"  {self.terms_label} = Σ of {self.n_terms} terms:")
            lines += [f"    {t.label:<34} {format_number(t.value)}" for t in self.terms]
            if self.n_terms > len(self.terms):
                lines.append(f"    {'the other ' + str(self.n_terms - len(self.terms)) + ' terms':<34} {format_number(self.rest)}")
        lines += [f"  {s.label:<36} {format_number(s.value)}" for s in self.steps]
        lines.append(f"  traced value                         {format_number(self.traced)}")
        for source in self.sources:
            lines += ["", *("  " + line for line in source.text().splitlines())]
        return "\n".join(lines)


def format_number(value: float) -> str:
    if np.isneginf(value):
        return "−∞"
    return f"{value:.7g}"


# -- building blocks ---------------------------------------------------------------------
def largest_terms(products: np.ndarray, label: Callable[[int], str], factors: Callable[[int], tuple],
           top: int = TOP_TERMS) -> tuple[tuple[Term, ...], float, float]:
    # [n] summands -> (largest `top` by |value|, Σ of the others, Σ of all), in float64
    products = np.asarray(products, dtype=np.float64)
    order = np.argsort(-np.abs(products), kind="stable")
    chosen = order[:top]
    terms = tuple(Term(label(int(k)), tuple(float(f) for f in factors(int(k))), float(products[k]))
                  for k in chosen)
    total = float(products.sum())
    rest = float(products[order[top:]].sum())
    return terms, rest, total


def traced_layer(trace, name: str, layer: int) -> np.ndarray:
    return trace.layer(name, layer)


def traced_head(trace, name: str, layer: int, head: int) -> np.ndarray:
    # one head's array, without the other heads' where they are derived (core/trace/layer_detail.py)
    return trace.head_array(name, layer, head)


class Names:
    """How an index reads: token i 'word', head dim c, ..."""

    def __init__(self, trace) -> None:
        self.tokens = trace.tokens

    def token(self, i: int) -> str:
        return f"{i} '{self.tokens[i]}'" if 0 <= i < len(self.tokens) else str(i)


# -- a linear map's output: x · W[:, col] + b[col] ----------------------------------------
def linear(name: str, index: tuple, title: str, formula: str, x: np.ndarray, w_col: np.ndarray,
           bias: Optional[float], traced: float, python: str, x_name: str = "x",
           w_name: str = "W", col: int = 0, notes: tuple = ()) -> Explanation:
    products = x.astype(np.float64) * w_col.astype(np.float64)
    label = lambda d: f"{x_name}[{d}] · {w_name}[{d}, {col}]"  # noqa: E731
    terms, rest, total = largest_terms(products, label, lambda d: (x[d], w_col[d]))
    steps = [Step(f"Σ {x_name}·{w_name}", total)]
    value = total
    if bias is not None:
        value = total + float(bias)
        steps.append(Step(f"+ b[{col}] = {format_number(float(bias))}", value))
    return Explanation(name, index, title, formula, {x_name: x, f"{w_name}[:, {col}]": w_col},
                       terms, rest, len(products), total, f"{x_name}·{w_name}[:, {col}]",
                       tuple(steps), value, float(traced), python, notes=notes,
                       summands=products, summand_label=label)


def _bias(model, name: str) -> Optional[np.ndarray]:
    return model.params[name] if name in model.params else None


