"""13. Logit lens (models with an output head): the final norm and the output head applied to
every hidden state, as if the model stopped after that layer. The lens is computed in a worker
(n_layer + 1 passes through the head) and kept with the trace (core.generate.lens)."""
from __future__ import annotations

from typing import Optional

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QScrollBar

from ...core.generate import lens, lens_ready
from ...core.labels import readable
from ..plots import Heatmap, Lines
from ..plots.common import format_value
from ..plots.lines import Curve
from .base import StageView

TOP = 5
MAX_CELL_TEXTS = 400          # beyond this many cells in view, names only on hover
COLUMN_PIXELS = 46            # narrowest a position's column gets: beyond, a window that scrolls


class LogitLensView(StageView):
    stage_key = "logit_lens"

    def build(self) -> None:
        self.table = self.add_figure("lens_top_tokens", Heatmap(
            "Top token at each hidden state", "position", "hidden state", signed=False,
            value_label="probability", row_names="hidden state", col_names="position",
            click="col"), 0, 0)
        self.table.set_column_window(COLUMN_PIXELS)
        # which positions the table shows, when not all fit: dragged, or following the selection
        self.scroll = self.add_widget(QScrollBar(Qt.Orientation.Horizontal), 1, 0)
        self.scroll.setToolTip("Positions shown in the table: scroll for the others")
        self.scroll.valueChanged.connect(self.table.scroll_to)
        self.table.columnWindowChanged.connect(self._on_window)
        self.updated.connect(self._show_scroll)      # (drawn: every extra widget was shown)
        self.curve = self.add_figure("lens_final_token", Lines(
            "The final prediction across layers", "hidden state", "probability"), 0, 1, row_span=2)
        self.grid.setColumnStretch(0, 3)
        self.grid.setColumnStretch(1, 2)

    # -- the lens, off the GUI thread -----------------------------------------------------------
    def prepare_work(self) -> Optional[str]:
        trace, model = self.trace, self.session.model
        return self.work_once(lens_ready(trace), lens, model, trace, TOP, message=(
            f"Computing the logit lens ({model.config.n_layer + 1} hidden states × "
            f"{model.config.n_vocab:,} tokens)…"))

    # -- drawing --------------------------------------------------------------------------------
    def state_names(self) -> list[str]:
        return ["emb"] + [f"L{i}" for i in range(self.trace.config.n_layer)]

    def update_data(self) -> None:
        trace, model = self.trace, self.session.model
        self.lens = result = lens(model, trace, TOP)
        states = self.state_names()
        self.names = [[readable(model.tokenizer.id_to_token(int(t))) for t in row]
                      for row in result.ids[:, :, 0]]
        what = "next token" if trace.config.causal else "token"
        self.table.set_title(f"Top {what} if the model stopped after each layer")
        self.table.set_data(result.probabilities[:, :, 0], states, self.labels, levels=(0.0, 1.0),
                            describe=self._describe)
        self.table.set_cell_labels(self.names, MAX_CELL_TEXTS, width=8)

    def _on_window(self, first: int, count: int, total: int) -> None:
        self.scroll.blockSignals(True)
        self.scroll.setRange(0, max(0, total - count))
        self.scroll.setPageStep(count)
        self.scroll.setValue(first)
        self.scroll.blockSignals(False)
        self._show_scroll()

    def _show_scroll(self) -> None:
        _, count, total = self.table.column_window()
        self.scroll.setVisible(count < total and self.table.isVisible())

    def _describe(self, row: int, col: int) -> str:
        result, model = self.lens, self.session.model
        ranked = ", ".join(f"'{readable(model.tokenizer.id_to_token(int(t)))}' {format_value(float(p))}"
                           for t, p in zip(result.ids[row, col], result.probabilities[row, col]))
        return f"{self.state_names()[row]}, position {col} '{self.labels[col]}': {ranked}"

    def update_selection(self) -> None:
        i, result, model = self.selected, self.lens, self.session.model
        self.table.set_highlight(col=i)
        self.table.ensure_column_visible(i)
        final = readable(model.tokenizer.id_to_token(int(result.final_ids[i])))
        first = int(np.argmax(result.ids[:, i, 0] == result.final_ids[i]))
        self.curve.set_title(f"p('{final}') after {i} '{self.labels[i]}', layer by layer")
        self.curve.set_curves([Curve(f"p('{final}')", result.final_probabilities[:, i]),
                               Curve("the state's own top token", result.probabilities[:, i, 0],
                                     color="#999", width=1.2)],
                              x_labels=self.state_names(), y_range=(0.0, 1.0))
        self._values = {"final_token": final, "first_state": self.state_names()[first],
                        "final_probability": f"{float(result.final_probabilities[-1, i]):.3f}",
                        "embedding_probability": f"{float(result.final_probabilities[0, i]):.3f}"}

    def stage_values(self) -> dict:
        # before the lens is drawn (computing), the template's values are not known yet
        return getattr(self, "_values", {"final_token": "…", "first_state": "…",
                                         "final_probability": "…", "embedding_probability": "…"})
