"""The Two Models tab: the open model (A) against a second one (B, the reference), on the
Stepper's text. A thin adapter over state/model_diff.py's TwoModels: it hands each new trace of
A to it, and draws what it computed (the drift map, each token's drift, one head's attention in
both, the weights' own error); every number comes from core/analysis/model_diff.py."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QLabel, QPushButton, QSplitter, QTableWidget,
                               QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from ...core.analysis import model_diff
from ...core.model import stages
from ...core.analysis.labels import token_labels
from ...state.model_diff import TwoModels
from ..connections import Connections
from .figures import AttentionPair, DriftMap, TokenDrift

MODEL_FILES = "Model files (*.safetensors *.gguf *.npz *.json);;All files (*)"
HINT = ("Open a second model of the same shape and tokenizer (a quantized file against its F16 twin, "
        "a fine-tuned model against its base) with File → Compare With Model… or the button.")


class TwoModelsView(QWidget):
    def __init__(self, session, settings=None, parent: Optional[QWidget] = None,
                 show_stepper=None) -> None:
        super().__init__(parent)
        self.session, self.settings = session, settings
        self.show_stepper = show_stepper      # () -> None: the window shows its Stepper tab
        self._stage_key = "layer_output"      # the stage of the drift-map cell last clicked
        self.state = TwoModels(session.workers)
        self._build()
        self._events = [("changed", self._on_changed), ("busy", self._on_busy), ("progress", self._on_progress),
                        ("attention", self._on_attention), ("weights", self._on_weights)]
        for name, slot in self._events:
            getattr(self.state.events, name).connect(slot)
        self._connections = Connections([(session.traceChanged, self._on_trace),
                                         (session.layerChanged, self._on_layer_or_head),
                                         (session.headChanged, self._on_layer_or_head),
                                         (session.selectionChanged, self._on_selection)])
        self._wanted = False          # the Stepper shows A − B: keep B traced while hidden
        self._on_changed()

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        row = QHBoxLayout()
        self.models_label = QLabel()
        self.models_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row.addWidget(self.models_label, stretch=1)
        self.open_button = QPushButton("Compare With Model…")
        self.open_button.clicked.connect(self.open_dialog)
        self.close_button = QPushButton("Close B")
        self.close_button.clicked.connect(self.state.close_other)
        self.stepper_button = QPushButton("Show A − B in the Stepper")
        self.stepper_button.setToolTip("Every stage view of the Stepper shows the open model minus B, "
                                       "from the stage and layer of the map's cell last clicked")
        self.stepper_button.clicked.connect(self.show_in_stepper)
        row.addWidget(self.open_button)
        row.addWidget(self.stepper_button)
        row.addWidget(self.close_button)
        layout.addLayout(row)
        self.readout = QLabel(HINT)
        self.readout.setWordWrap(True)
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.readout)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        self.drift_map = DriftMap()
        self.drift_map.cellClicked.connect(self._cell_clicked)
        splitter.addWidget(self.drift_map)
        self.details = QTabWidget()
        self.token_drift = TokenDrift()
        self.attention = AttentionPair()
        self.weights_table = QTableWidget(0, 2)
        self.weights_table.setHorizontalHeaderLabels(["tensor", "‖W_A − W_B‖ / ‖W_B‖"])
        self.weights_table.horizontalHeader().setStretchLastSection(True)
        weights = QWidget()
        weights_layout = QVBoxLayout(weights)
        self.weights_button = QPushButton("Compute Every Tensor's Error (reads every weight of both)")
        self.weights_button.clicked.connect(self.state.request_weights)
        weights_layout.addWidget(self.weights_button)
        weights_layout.addWidget(self.weights_table)
        self.details.addTab(self.token_drift, "Per token")
        self.details.addTab(self.attention, "Attention, A and B")
        self.details.addTab(weights, "Weights")
        splitter.addWidget(self.details)
        splitter.setSizes([520, 600])
        layout.addWidget(splitter, stretch=1)

    # -- requests ------------------------------------------------------------------------------
    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Compare with a model file (or pick a folder's "
                                              "config.json)", "", MODEL_FILES)
        if path:
            self.open_other(path)

    def open_other(self, path: str) -> None:
        if self.session.model is None:
            self.readout.setText("Open a model first: the second one is compared against it.")
            return
        self.state.open_other(path, self.session.model, self.session.trace)

    def _on_trace(self) -> None:
        self.state.set_trace(self.session.model, self.session.trace)

    def _on_layer_or_head(self, *_) -> None:
        self.state.request_attention(self.session.layer, self.session.head)

    def _on_selection(self, *_) -> None:
        self._draw_tokens()

    def show_in_stepper(self) -> None:
        """The Stepper's A − B mode, at the stage of the cell last clicked."""
        set_show = getattr(self.session, "set_show_difference", None)
        if set_show is None or self.state.result is None:
            return
        self.session.set_stage(self._stage_key)
        set_show(True)
        if self.show_stepper is not None:
            self.show_stepper()

    def _cell_clicked(self, row: int, col: int) -> None:
        stage = stages.stage_computing(self.drift_map.stage_at(col) or "")
        if stage is not None:
            self._stage_key = stage.key
        self.session.set_layer(row)
        if self.drift_map.stage_at(col) in ("q", "k", "v", "attn_weights", "head_outputs"):
            self.details.setCurrentWidget(self.attention)

    # -- drawing -------------------------------------------------------------------------------
    def _on_changed(self) -> None:
        state = self.state
        a = self.session.model.name if self.session.model is not None else "no model"
        b = state.path_b or "—"
        self.models_label.setText(f"<b>A</b> (the open model): {a}   ·   <b>B</b> (the reference): {b}")
        self.close_button.setEnabled(state.model_b is not None)
        self.stepper_button.setEnabled(state.result is not None)
        self.weights_button.setEnabled(state.model_b is not None)
        result = state.result
        self._hand_to_session(result)
        if result is None:
            self.readout.setText(state.message or (HINT if state.model_b is None else ""))
            return
        self.readout.setText(self._readout_text(result.diff))
        self.drift_map.show_diff(result.diff)
        self._draw_tokens()
        self.weights_table.setRowCount(0)
        state.request_attention(self.session.layer, self.session.head)

    def _hand_to_session(self, result) -> None:
        """The pair of traces the Stepper's "Show A − B" draws from (none: B closed or refused;
        while B runs for a new text the session's A is newer than the pair, so the views wait)."""
        set_against = getattr(self.session, "set_against", None)
        if set_against is None:
            return
        if result is not None:
            set_against(result.trace_a, result.trace_b, self.state.model_b.name, self.state.model_b)
        elif self.state.model_b is None or self.state.message:
            set_against(None, None)

    def _readout_text(self, diff: model_diff.ModelDiff) -> str:
        reading = model_diff.readout(diff)
        labels = token_labels(self.state.result.trace_a, self.session.model.tokenizer)
        parts = []
        if reading.largest is not None:
            layer, part, rise = reading.largest
            parts.append(f"Most drift enters at layer {layer}'s {part} (the stream's ‖A − B‖ / ‖B‖ rises {rise:+.3g}).")
        parts.append(f"Last hidden state: ‖A − B‖ / ‖B‖ = {reading.final_relative:.4g}, mean cosine "
                     f"{reading.final_cosine:.6f}; token {reading.worst_token} '{labels[reading.worst_token]}' "
                     f"drifts most ({reading.worst_token_relative:.3g}).")
        if reading.kl is not None:
            parts.append(f"Output: KL(p_B ‖ p_A) = {reading.kl:.4g} nats on average, top-1 agrees at "
                         f"{100 * reading.top1_agree:.0f} % of {len(diff.input_ids)} positions.")
        return " ".join(parts)

    def _draw_tokens(self) -> None:
        result = self.state.result
        if result is None or self.session.model is None:
            return
        labels = token_labels(result.trace_a, self.session.model.tokenizer)
        selected = min(max(self.session.selected_token, 0), len(labels) - 1)
        self.token_drift.show_diff(result.diff, labels, selected)

    def _on_attention(self) -> None:
        result, pair = self.state.result, self.state.pair
        if result is None or pair is None:
            return
        layer, head, weights_a, weights_b = pair
        labels = token_labels(result.trace_a, self.session.model.tokenizer)
        self.attention.show_pair(layer, head, weights_a, weights_b, labels)
        if layer < len(result.diff.layers) and head < len(result.diff.layers[layer].attention_divergence):
            compared = result.diff.layers[layer]
            self.attention.caption.setText(
                f"Layer {layer}, head {head} (the toolbar's): Jensen–Shannon divergence of B's rows from "
                f"A's {compared.attention_divergence[head]:.3g} nats on average (log 2 = 0.693 at most); "
                f"the layer's weights: ‖A − B‖ / ‖B‖ = {compared.stages['attn_weights'].relative:.3g}.")

    def _on_weights(self) -> None:
        errors = self.state.weights or []
        self.weights_table.setRowCount(len(errors))
        for row, (name, value) in enumerate(errors):
            self.weights_table.setItem(row, 0, QTableWidgetItem(name))
            self.weights_table.setItem(row, 1, QTableWidgetItem(f"{value:.6g}"))

    def _on_busy(self, busy: bool, what: str) -> None:
        if busy:
            self.readout.setText(what)

    def _on_progress(self, done: int, total: int) -> None:
        if self.state.busy:
            self.readout.setText(f"Comparing layer {done} of {total}…")

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.state.set_active(True)

    def hideEvent(self, event) -> None:
        super().hideEvent(event)
        self.state.set_active(self._wanted)   # typing in the Stepper then traces A alone, unless it shows A − B

    def set_wanted(self, wanted: bool) -> None:
        """The Stepper shows A − B: B follows every new text of A even while this tab is hidden."""
        self._wanted = wanted
        self.state.set_active(wanted or self.isVisible())

    # -- closing -------------------------------------------------------------------------------
    def shutdown(self) -> None:
        self.state.close_other()

    def closeEvent(self, event) -> None:
        self._connections.disconnect_all()
        for name, slot in self._events:
            try:
                getattr(self.state.events, name).disconnect(slot)
            except TypeError:
                pass
        self._events = []
        super().closeEvent(event)
