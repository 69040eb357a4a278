"""The provenance panel while the stage views show A − B (a second model against the open one):
an Alt-clicked difference explained in both models (core/analysis/provenance/difference.py) —
A's value, B's value and A − B; where the value is a sum whose summands pair up, the summands
whose difference is largest, with A's and B's; then each model's own arithmetic."""
from __future__ import annotations

import html

from ...core.analysis.provenance.difference import DifferenceExplanation


def _num(value: float) -> str:
    if value == float("-inf"):
        return "−∞"
    return f"{value:.7g}"


def difference_html(d: DifferenceExplanation, names: tuple[str, str], explanation_html) -> str:
    """`explanation_html`: one explanation as HTML (the panel's)."""
    a, b = (html.escape(n) for n in names)
    parts = [f"<p style='background: #d7e7fb; padding: 3px;'><b>A − B</b> of {html.escape(d.a.title)}</p>",
             "<table cellspacing='0' cellpadding='2' width='100%'>"
             f"<tr><td>A ({a})</td><td align='right'>{_num(d.a.traced)}</td></tr>"
             f"<tr><td>B ({b})</td><td align='right'>{_num(d.b.traced)}</td></tr>"
             f"<tr><td><b>A − B</b></td><td align='right'><b>{_num(d.difference)}</b></td></tr></table>"]
    if d.n_terms:
        rows = ""
        for k, t in enumerate(d.terms):
            bold = ("<b>", "</b>") if k == 0 else ("", "")
            rows += (f"<tr><td>{bold[0]}{html.escape(t.label)}{bold[1]}</td><td align='right'>{_num(t.a)}</td>"
                     f"<td align='right'>{_num(t.b)}</td><td align='right'>{bold[0]}{_num(t.difference)}{bold[1]}</td></tr>")
        if d.n_terms > len(d.terms):
            rows += (f"<tr><td><i>the other {d.n_terms - len(d.terms)} summands</i></td><td></td><td></td>"
                     f"<td align='right'>{_num(d.rest)}</td></tr>")
        rows += (f"<tr><td><b>Σ (A − B)</b></td><td align='right'>{_num(d.a.terms_total)}</td>"
                 f"<td align='right'>{_num(d.b.terms_total)}</td><td align='right'><b>{_num(d.terms_difference)}</b></td></tr>")
        parts.append(f"<p>{html.escape(d.a.terms_label)} is a sum of {d.n_terms} summands that pair up "
                     "(the k-th means the same in both); the largest differences first:</p>"
                     "<table cellspacing='0' cellpadding='2' width='100%'><tr><th align='left'>summand</th>"
                     "<th align='right'>A</th><th align='right'>B</th><th align='right'>A − B</th></tr>"
                     f"{rows}</table>")
        if d.a.steps and abs(d.terms_difference - d.difference) > 1e-6 * max(1.0, abs(d.difference)):
            parts.append("<p style='color: #555;'>The steps after the sum (a scale, a bias, a mask) "
                         "make the rest of the difference: see each model's steps below.</p>")
    else:
        parts.append(f"<p style='color: #555;'>{html.escape(d.unpaired)}.</p>")
    parts.append(f"<hr/><p><b>A ({a})</b></p>" + explanation_html(d.a))
    parts.append(f"<hr/><p><b>B ({b})</b></p>" + explanation_html(d.b))
    return "".join(parts)


def difference_python(d: DifferenceExplanation) -> str:
    return ("# A: with the open model's `model` and `trace` in scope; run it again with B's for B's value\n"
            + d.a.python)
