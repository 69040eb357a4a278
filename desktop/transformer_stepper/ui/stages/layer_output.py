"""11. Layer output: the contextual embedding after this layer, and how far each token has
moved from its own embedding output ("embed": what enters layer 0) across the layers."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyqtgraph as pg

from ...core.model import measures
from ..plots import Curve, Heatmap, Lines
from ..plots.common import SELECTED
from .base import StageView

MAX_TOKEN_CURVES = 32      # beyond this, the other tokens are summarised by their mean


class LayerOutputView(StageView):
    stage_key = "layer_output"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.hidden = self.add_figure("layer_output", Heatmap(
            "Hidden states after this layer", "dimension", "token", value_label="value",
            row_names="token", col_names="dim"), 0, 0, explain=self.cell("layer_out"))
        yield
        self.drift = self.add_figure("cosine_to_layer0", Lines(
            "Each token's cosine to its own embedding output ('embed')", "hidden state", "cosine"), 0, 1)
        yield
        self.similarity = self.add_figure("token_similarity", Heatmap(
            "Cosine between tokens after this layer", "token", "token", value_label="cosine",
            row_names="token", col_names="token"), 1, 0, 1, 2)
        self.layer_line = pg.InfiniteLine(angle=90, pen=pg.mkPen("#555", width=1,
                                                                 style=pg.QtCore.Qt.PenStyle.DashLine))
        self.drift.plot.addItem(self.layer_line)
        self.grid.setRowStretch(0, 1)
        self.grid.setRowStretch(1, 1)

    def update_data(self) -> None:
        trace, layer = self.trace, self.session.layer
        config = trace.config
        states = trace.hidden_states                       # [n_layer + 1, n, d]
        self.hidden.set_title(f"Hidden states after layer {layer}: {trace.n_seq} × {config.d_model}"
                              " — the contextual embeddings")
        self.hidden.set_data(self.layer_array("layer_out"), self.labels)
        base = states[0]
        self.cosines = np.stack([measures.cosine_rows(s, base) for s in states])   # [L+1, n]
        self.similarity.set_title(f"Cosine between tokens after layer {layer}")
        self.draw_in_its_turn(self.similarity, self._draw_similarity)     # [n_seq, n_seq]
        # (for GPT-2 the last entry has ln_f applied, as Hugging Face's hidden_states: the
        # explanation says so; the axis stays short)
        self.layer_names = ["embed"] + [f"layer {i}" for i in range(config.n_layer)]
        self.layer_line.setValue(layer + 1)

    def _draw_similarity(self) -> None:
        self.similarity.set_data(measures.cosine_matrix(self.layer_array("layer_out")), self.labels,
                                 self.labels, levels=(-1.0, 1.0))
        self.similarity.set_highlight(row=self.selected)          # (on the new rows)

    def update_selection(self) -> None:
        i = self.selected
        self.hidden.set_highlight(row=i)
        self.similarity.set_highlight(row=i)
        self.draw_in_its_turn(self.drift, self._draw_drift)     # 33 curves: in its own turn

    def _draw_drift(self) -> None:
        i = self.selected
        n = self.cosines.shape[1]
        curves = [Curve("mean of all tokens", self.cosines.mean(axis=1), color="#555", width=2.5)]
        others = [j for j in range(n) if j != i][:MAX_TOKEN_CURVES]
        if others:        # one item for them all (made as 32 items: ~0.2 s in one turn)
            curves.append(Curve("", self.cosines[:, others].T, color=pg.mkColor(120, 150, 200, 90), width=1,
                                rows=[f"'{self.labels[j]}' ({j})" for j in others]))
        curves.append(Curve(f"'{self.labels[i]}' (selected)", self.cosines[:, i], color=SELECTED, width=3))
        self.drift.set_curves(curves, x_labels=self.layer_names,
                              y_range=(min(0.0, float(self.cosines.min())), 1.0))

    def stage_values(self) -> dict:
        i, layer = self.selected, self.session.layer
        trace = self.trace
        same = [j for j in range(trace.n_seq) if j != i and trace.input_ids[j] == trace.input_ids[i]]
        values = {"cos_layer0": f"{float(self.cosines[layer + 1, i]):.3f}",
                  "cos_last": f"{float(self.cosines[-1, i]):.3f}", "n_states": len(self.cosines)}
        if same:
            j = same[0]
            out = self.layer_array("layer_out")
            values.update(twin=j, twin_cos=f"{float(measures.cosine_rows(out[i:i+1], out[j:j+1])[0]):.3f}")
        return values

    def stage_flags(self) -> dict:
        trace, i = self.trace, self.selected
        return {"twin": int(np.count_nonzero(trace.input_ids == trace.input_ids[i])) > 1}
