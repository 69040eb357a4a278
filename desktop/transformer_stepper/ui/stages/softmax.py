"""7. Softmax: scores -> attention weights; a temperature slider re-runs the softmax live
(a what-if on this view only: the stored trace keeps the model's own weights)."""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSlider, QWidget

from ...core.model import measures
from ...core.analysis import readouts
from ..plots import Bars, Heatmap
from ..plots.common import finite_max, format_value
from .base import StageView

SLIDER_STEPS = 200          # slider position s -> T = 10 ** ((s - 100) / 100): 0.1 … 10


def slider_to_temperature(position: int) -> float:
    return 10.0 ** ((position - SLIDER_STEPS // 2) / (SLIDER_STEPS // 2))


def temperature_to_slider(temperature: float) -> int:
    return int(round(SLIDER_STEPS // 2 * (1 + math.log10(temperature))))


class SoftmaxView(StageView):
    stage_key = "softmax"

    def build(self) -> None:
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
            explain=self.head_cell("attn_weights"))
        self.row = self.add_figure("query_weights", Bars(
            "Weights of the selected query", "key", "weight", value_name="weight"), 0, 1,
            explain=self.query_bar("attn_weights"))
        self.grid.setColumnStretch(0, 3)
        self.grid.setColumnStretch(1, 2)
        self.listen(self.session.temperatureChanged, self._on_temperature)
        self.shown_weights = np.zeros((0, 0), dtype=np.float32)

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
        if temperature == 1.0:
            self.shown_weights = self.head_array("attn_weights")
            what = "the model's own weights"
        else:
            self.shown_weights = measures.softmax_with_temperature(self.head_array("scores"), temperature)
            what = f"what-if at T = {temperature:.2f}"
        self.temperature_label.setText(f"T = {temperature:.2f} ({what})")
        if trace.mask is not None:         # masked weights are exactly 0: hatch them as "masked"
            self.shown_weights = np.where(trace.mask, np.float32(np.nan), self.shown_weights)
        self.weights.set_title(f"Attention weights softmax(scores / T), layer {layer}, head {head}"
                               + (" — hatched: masked" if trace.config.causal else ""))
        self.weights.set_data(self.shown_weights, self.labels, self.labels,
                              levels=(0.0, max(finite_max(self.shown_weights, 1.0), 1e-6)))

    def update_selection(self) -> None:
        i = self.selected
        self.weights.set_highlight(row=i)
        masked = ~np.isfinite(self.head_array("scores")[i])
        weights = np.nan_to_num(self.shown_weights[i], nan=0.0)
        self.row.set_title(f"Weights of query {i} '{self.labels[i]}' (they sum to 1)")
        self.row.set_data(weights, self.labels, i, muted=masked,
                          notes=["masked" if m else "" for m in masked])

    def stage_values(self) -> dict:
        r = readouts.softmax_readout(self.shown_weights[self.selected], self.head_array("scores")[self.selected])
        return {"best_key": self.labels[r.best_key], "best_weight": format_value(r.best_weight),
                "row_sum": f"{r.row_sum:.6f}", "entropy": f"{r.entropy:.3f}",
                "uniform_entropy": f"{r.uniform_entropy:.3f}"}
