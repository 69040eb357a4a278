"""7. Softmax: scores -> attention weights; a temperature slider re-runs the softmax live
(a what-if on this view only: the stored trace keeps the model's own weights). A model with
attention sinks (gpt-oss) shows each head's sink as one more column, "⊘ sink": the share of
each row no token receives (the row's weights sum to 1 minus it)."""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSlider, QWidget

from ...core.model import measures
from ...core.analysis import readouts
from ..plots import Bars, Heatmap
from ..plots.common import finite_max, format_value
from .base import StageView

SINK_LABEL = "⊘ sink"
SLIDER_STEPS = 200          # slider position s -> T = 10 ** ((s - 100) / 100): 0.1 … 10


def slider_to_temperature(position: int) -> float:
    return 10.0 ** ((position - SLIDER_STEPS // 2) / (SLIDER_STEPS // 2))


def temperature_to_slider(temperature: float) -> int:
    return int(round(SLIDER_STEPS // 2 * (1 + math.log10(temperature))))


class SoftmaxView(StageView):
    stage_key = "softmax"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.shown_weights = np.zeros((0, 0), dtype=np.float32)
        self.shown_sink = None             # [n_seq] the sink's share of each row, or None (no sinks)
        bar = QWidget()
        row = QHBoxLayout(bar)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Temperature:"))
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.setValue(temperature_to_slider(self.session.temperature))
        self.slider.setToolTip("softmax(scores / T): T < 1 sharpens, T > 1 flattens")
        self.slider.setMaximumWidth(360)
        row.addWidget(self.slider)
        self.temperature_label = QLabel()
        self.temperature_label.setMinimumWidth(210)
        row.addWidget(self.temperature_label)
        self.reset = QPushButton("Reset to T = 1")
        self.reset.clicked.connect(self._reset_temperature)   # a bound method: no cycle
        row.addWidget(self.reset)
        row.addStretch(1)
        self.add_controls(bar)
        # the slider may fire hundreds of times a second: at most 30 softmaxes a second
        self._proxy = pg.SignalProxy(self.slider.valueChanged, rateLimit=30, slot=self._slider_moved)
        self.weights = self.add_figure("attention_weights", Heatmap(
            "Attention weights", "key (the token looked at)", "query (the token looking)",
            signed=False, value_label="weight", row_names="query", col_names="key"), 0, 0,
            explain=self._weight_cell)
        yield
        self.row = self.add_figure("query_weights", Bars(
            "Weights of the selected query", "key", "weight", value_name="weight"), 0, 1,
            explain=self._query_bar, on_click=self._key_clicked)
        self.grid.setColumnStretch(0, 3)
        self.grid.setColumnStretch(1, 2)
        self.listen(self.session.temperatureChanged, self._on_temperature)

    # -- the sink's column (gpt-oss): the last one, past the tokens -----------------------------
    def _is_sink(self, j: int) -> bool:
        return self.shown_sink is not None and j == self.trace.n_seq

    def _weight_cell(self, r: int, c: int):
        layer, head = self.session.layer, self.session.head
        return ("sink_weights", (layer, head, r, 0)) if self._is_sink(c) else ("attn_weights", (layer, head, r, c))

    def _query_bar(self, j: int, _):
        return self._weight_cell(self.selected, j)

    def _key_clicked(self, j: int) -> None:
        if not self._is_sink(j):
            self.session.select_token(j)

    def _sink_logit(self):
        config = self.trace.config
        if not config.attn_sinks:
            return None
        return float(self.session.model.params[f"h.{self.session.layer}.attn.sinks"][self.session.head])

    def data_key(self) -> tuple:
        return super().data_key() + (self.session.temperature,)

    def _slider_moved(self, args) -> None:
        self.session.set_temperature(slider_to_temperature(args[0]))

    def _on_temperature(self, temperature: float) -> None:
        self.slider.blockSignals(True)
        self.slider.setValue(temperature_to_slider(temperature))
        self.slider.blockSignals(False)
        self._on_data()

    def _reset_temperature(self) -> None:
        self.session.set_temperature(1.0)

    def update_data(self) -> None:
        trace, layer, head = self.trace, self.session.layer, self.session.head
        temperature = self.session.temperature
        sink = self._sink_logit()
        if temperature == 1.0:
            self.shown_weights = self.head_array("attn_weights")
            self.shown_sink = None if sink is None else self.head_array("sink_weights")[:, 0]
            what = "the model's own weights"
        else:
            scores = self.head_array("scores")
            self.shown_weights = measures.softmax_with_temperature(scores, temperature, sink)
            self.shown_sink = None if sink is None else measures.sink_share(scores, temperature, sink)
            what = f"what-if at T = {temperature:.2f}"
        self.temperature_label.setText(f"T = {temperature:.2f} ({what})")
        if trace.mask is not None:         # masked weights are exactly 0: hatch them as "masked"
            self.shown_weights = np.where(trace.mask, np.float32(np.nan), self.shown_weights)
        shown, columns = self.shown_weights, self.labels
        if self.shown_sink is not None:    # the sink's share as one more column
            shown = np.concatenate([shown, self.shown_sink[:, None]], axis=1)
            columns = list(self.labels) + [SINK_LABEL]
        sink_note = (f" — last column: the head's sink (logit {sink:.3g}), the share no token receives"
                     if sink is not None else "")
        self.weights.set_title(f"Attention weights softmax(scores / T), layer {layer}, head {head}"
                               + (" — hatched: masked" if trace.config.causal else "") + sink_note)
        self.weights.set_data(shown, self.labels, columns,
                              levels=(0.0, max(finite_max(shown, 1.0), 1e-6)))

    def update_selection(self) -> None:
        i = self.selected
        self.weights.set_highlight(row=i)
        masked = ~np.isfinite(self.head_array("scores")[i])
        weights = np.nan_to_num(self.shown_weights[i], nan=0.0)
        notes, labels = ["masked" if m else "" for m in masked], list(self.labels)
        if self.shown_sink is None:
            self.row.set_title(f"Weights of query {i} '{self.labels[i]}' (they sum to 1)")
        else:
            share = float(self.shown_sink[i])
            self.row.set_title(f"Weights of query {i} '{self.labels[i]}' and the sink: the tokens get "
                               f"{1 - share:.3f}, the sink {share:.3f}")
            weights, masked = np.append(weights, np.float32(share)), np.append(masked, True)
            labels.append(SINK_LABEL)
            notes.append("the head's sink: no value behind it, this share reaches no token")
        self.row.set_data(weights, labels, i, muted=masked, notes=notes)

    def stage_values(self) -> dict:
        r = readouts.softmax_readout(self.shown_weights[self.selected], self.head_array("scores")[self.selected])
        values = {"best_key": self.labels[r.best_key], "best_weight": format_value(r.best_weight),
                  "row_sum": f"{r.row_sum:.6f}", "entropy": f"{r.entropy:.3f}",
                  "uniform_entropy": f"{r.uniform_entropy:.3f}"}
        if self.shown_sink is not None:
            share = self.shown_sink
            values.update(sink_logit=f"{self._sink_logit():.4g}", sink_share=f"{float(share[self.selected]):.4f}",
                          sink_mean=f"{float(share.mean()):.3f}", sink_max=f"{float(share.max()):.3f}",
                          sink_max_token=self.labels[int(share.argmax())])
        return values

    def stage_flags(self) -> dict:
        return {"sinks": self.shown_sink is not None}
