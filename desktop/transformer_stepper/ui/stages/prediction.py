"""12. Prediction (models with an LM head): logits -> probabilities over the vocabulary."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from .. import analysis
from ..plots import Bars, Heatmap
from ..plots.common import format_value
from .base import StageView

TOP_K = 10
TOP_PER_POSITION = 5
MAX_CELL_TEXTS = 64 * TOP_PER_POSITION     # beyond this, names only on hover


class PredictionView(StageView):
    stage_key = "prediction"

    def build(self) -> None:
        self.top = self.add_figure("top_tokens", Bars(
            "Most likely tokens", "probability", "", horizontal=True, tokens=False,
            value_name="probability"), 0, 0,
            explain=lambda r, _: ("logits", (self.selected, int(self._top_ids[r]))))
        self.table = self.add_figure("top_per_position", Heatmap(
            "Top predictions at every position", "rank", "position", signed=False,
            value_label="probability", row_names="position", col_names="rank"), 0, 1,
            explain=lambda r, c: ("logits", (r, int(self.top_ids[r, c]))))
        self.cell_texts: list[pg.TextItem] = []
        self.grid.setColumnStretch(0, 2)
        self.grid.setColumnStretch(1, 3)

    def _texts(self, count: int) -> list[pg.TextItem]:
        while len(self.cell_texts) < count:
            text = pg.TextItem(anchor=(0.5, 0.5), color="#000")
            self.table.plot.addItem(text)
            self.cell_texts.append(text)
        for text in self.cell_texts[count:]:
            text.setVisible(False)
        return self.cell_texts[:count]

    def update_data(self) -> None:
        trace, model = self.trace, self.session.model
        logits = trace.logits
        n = trace.n_seq
        self.top_ids = np.zeros((n, TOP_PER_POSITION), dtype=np.int64)
        self.top_probs = np.zeros((n, TOP_PER_POSITION), dtype=np.float32)
        for i in range(n):
            self.top_ids[i], self.top_probs[i] = analysis.top_k_probabilities(logits[i], TOP_PER_POSITION)
        self.top_names = [[model.tokenizer.id_to_token(t) for t in row] for row in self.top_ids]
        causal = trace.config.causal
        self.table.set_title("Top next tokens after each position" if causal
                             else "What the masked-LM head predicts at each position")
        self.table.set_data(self.top_probs, self.labels, [f"#{r + 1}" for r in range(TOP_PER_POSITION)],
                            levels=(0.0, 1.0), describe=self._describe)
        show_text = n * TOP_PER_POSITION <= MAX_CELL_TEXTS
        texts = self._texts(n * TOP_PER_POSITION if show_text else 0)
        for k, text in enumerate(texts):
            i, r = divmod(k, TOP_PER_POSITION)
            name = self.top_names[i][r]
            text.setText(name if len(name) <= 12 else name[:11] + "…")
            text.setColor("#fff" if self.top_probs[i, r] > 0.55 else "#000")
            text.setPos(r, i)
            text.setVisible(True)

    def _describe(self, row: int, col: int) -> str:
        return (f"position {row} '{self.labels[row]}', rank {col + 1}: "
                f"'{self.top_names[row][col]}' (id {int(self.top_ids[row, col])}), "
                f"p = {format_value(float(self.top_probs[row, col]))}")

    def update_selection(self) -> None:
        i = self.selected
        model = self.session.model
        self.table.set_highlight(row=i)
        ids, probs = analysis.top_k_probabilities(self.trace.logits[i], TOP_K)
        self._top_ids = ids
        what = "after" if self.trace.config.causal else "at"
        self.top.set_title(f"Most likely tokens {what} position {i} '{self.labels[i]}'")
        self.top.set_data(probs, [f"{model.tokenizer.id_to_token(t)} ({int(t)})" for t in ids],
                          value_range=(0.0, max(float(probs.max(initial=0)), 1e-3)))
        self._best = (model.tokenizer.id_to_token(ids[0]), float(probs[0]))

    def stage_values(self) -> dict:
        best, probability = self._best
        return {"best_next": best, "best_probability": f"{probability:.3f}"}
