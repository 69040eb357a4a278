"""6. Scores: q·kᵀ/√d_head for the selected head, with the causal mask where the model has one."""
from __future__ import annotations

import numpy as np

from ..plots import Bars, Heatmap
from ..plots.common import format_value
from .base import StageView


class ScoresView(StageView):
    stage_key = "scores"

    def build(self) -> None:
        self.scores = self.add_figure("scores", Heatmap(
            "Scores q·kᵀ/√d_head", "key (the token looked at)", "query (the token looking)",
            value_label="score", row_names="query", col_names="key"), 0, 0, explain=self.head_cell("scores"))
        self.row = self.add_figure("query_scores", Bars(
            "Scores of the selected query", "key", "score", value_name="score"), 0, 1,
            explain=self.query_bar("scores"))
        self.grid.setColumnStretch(0, 3)
        self.grid.setColumnStretch(1, 2)

    def update_data(self) -> None:
        trace, layer, head = self.trace, self.session.layer, self.session.head
        masked = " (hatched: masked, a token may not look ahead)" if trace.config.causal else ""
        self.scores.set_title(f"Scores q·kᵀ/√{trace.config.d_head}, layer {layer}, head {head}{masked}")
        self.scores.set_data(self.head_array("scores"), self.labels, self.labels)

    def update_selection(self) -> None:
        i = self.selected
        self.scores.set_highlight(row=i)
        row = self.head_array("scores")[i]
        raw = self.head_array("scores_raw")[i]
        masked = ~np.isfinite(row)
        notes = [("masked: after the query, so −∞ and weight 0" if m else
                  f"q·k = {format_value(float(r))}, ÷ √{self.trace.config.d_head}")
                 for m, r in zip(masked, raw)]
        self.row.set_title(f"Scores of query {i} '{self.labels[i]}' against every key")
        self.row.set_data(np.where(masked, 0.0, row), self.labels, i, muted=masked, notes=notes)

    def stage_values(self) -> dict:
        row = self.head_array("scores")[self.selected]
        finite = np.isfinite(row)
        best = int(np.argmax(np.where(finite, row, -np.inf)))
        return {"best_key": self.labels[best], "best_score": format_value(float(row[best])),
                "n_masked": int((~finite).sum()), "sqrt_d_head": f"{np.sqrt(self.trace.config.d_head):.3g}"}
