"""6. Scores: q·kᵀ/√d_head for the selected head, with the causal mask where the model has one;
titled as the pass computed them (core/model/score_terms.py: T5 does not scale and adds a bias)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ...core.model.score_terms import score_bias, score_terms
from ...core.model.ops import soft_cap
from ..plots import Bars, Heatmap, Lines
from ..plots.lines import Curve
from ..plots.common import format_value
from .base import StageView


class ScoresView(StageView):
    stage_key = "scores"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.scores = self.add_figure("scores", Heatmap(
            "Scores q·kᵀ/√d_head", "key (the token looked at)", "query (the token looking)",
            value_label="score", row_names="query", col_names="key"), 0, 0, explain=self.head_cell("scores"))
        yield
        self.row = self.add_figure("query_scores", Bars(
            "Scores of the selected query", "key", "score", value_name="score"), 0, 1,
            explain=self.query_bar("scores"))
        yield
        # Gemma 2's soft-cap: the tanh curve and this query's scores before and after it
        self.cap = self.add_figure("soft_cap", Lines(
            "Soft-cap: cap·tanh(s / cap)", "score before the cap", "score after the cap"), 1, 0, 1, 2)
        self.cap.unused = True                 # until a soft-capped model's scores are drawn
        self.cap.hide()
        self.grid.setColumnStretch(0, 3)
        self.grid.setColumnStretch(1, 2)

    def update_data(self) -> None:
        trace, layer, head = self.trace, self.session.layer, self.session.head
        config = trace.config
        masked = " (hatched: masked, a token may not look ahead)" if config.causal else ""
        if config.local_layers and config.is_local(layer) and config.sliding_window:
            masked = f" (hatched: masked; a local layer: window of {config.sliding_window})"
        scaled = score_terms(trace).formula(config.attn_softcap)
        self.scores.set_title(f"Scores {scaled}, layer {layer}, head {head}{masked}")
        self.scores.set_data(self.head_array("scores"), self.labels, self.labels)
        self.cap.unused = not config.attn_softcap

    def update_selection(self) -> None:
        i = self.selected
        self.scores.set_highlight(row=i)
        row = self.head_array("scores")[i]
        raw = self.head_array("scores_raw")[i]
        masked = ~np.isfinite(row)
        config = self.trace.config
        terms = score_terms(self.trace)
        bias = score_bias(self.trace, "", self.session.head)
        bias = np.zeros_like(raw) if bias is None else bias[i]
        notes = [("masked: blocked for this query, so −∞ and weight 0" if m else
                  f"q·k = {format_value(float(r))}" +
                  (f", × {terms.scale:.4g}" if terms.scale != 1.0 else " (not scaled)") +
                  (f" = {format_value(float(r) * terms.scale)}, soft-capped to {format_value(float(v))}"
                   if config.attn_softcap else "") +
                  (f", + {terms.bias_label} {format_value(float(b))}" if terms.bias_name else ""))
                 for m, r, v, b in zip(masked, raw, row, bias)]
        if config.attn_softcap:
            self._draw_cap(self.head_array("scores_uncapped")[i], masked, config.attn_softcap)
        self.row.set_title(f"Scores of query {i} '{self.labels[i]}' against every key")
        self.row.set_data(np.where(masked, 0.0, row), self.labels, i, muted=masked, notes=notes)

    def _draw_cap(self, before: np.ndarray, masked: np.ndarray, cap: float) -> None:
        # the curve over the head's range, the identity it bends away from, this query's points
        shown = before[~masked]
        reach = max(float(np.max(np.abs(shown))) if shown.size else 0.0, cap) * 1.2
        x = np.linspace(-reach, reach, 201, dtype=np.float32)
        ordered = np.sort(shown).astype(np.float32)
        self.cap.set_curves([Curve(f"{cap:g}·tanh(s / {cap:g})", soft_cap(x, cap), x=x),
                             Curve("no cap (y = s)", x, x=x),
                             Curve(f"query {self.selected}'s scores", soft_cap(ordered, cap), x=ordered, width=5)])
        self.cap.set_title(f"Soft-cap at {cap:g}: query {self.selected}'s scores before → after "
                           f"(largest {format_value(float(np.max(shown)) if shown.size else 0.0)} → "
                           f"{format_value(float(soft_cap(ordered[-1:], cap)[0]) if shown.size else 0.0)})")

    def stage_values(self) -> dict:
        row = self.head_array("scores")[self.selected]
        finite = np.isfinite(row)
        best = int(np.argmax(np.where(finite, row, -np.inf)))
        terms = score_terms(self.trace)
        formula = terms.formula().replace("q·kᵀ", "q · kᵀ").replace(" (not scaled)", "")
        return {"best_key": self.labels[best], "best_score": format_value(float(row[best])),
                "n_masked": int((~finite).sum()), "sqrt_d_head": f"{np.sqrt(self.trace.config.d_head):.3g}",
                "mscale": f"{self.trace.config.attn_mscale:.4g}", "rope_factor": f"{self.trace.config.rope_factor:g}",
                "mscale_squared": f"{self.trace.config.attn_mscale ** 2:.4g}",
                "formula": formula}

    def stage_flags(self) -> dict:
        terms = score_terms(self.trace)
        return {"unscaled": terms.scale == 1.0, "position_bias": bool(terms.bias_name),
                "mscale": self.trace.config.attn_mscale != 1.0}
