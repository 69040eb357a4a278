"""The Interventions tab: switch a part of the model off (ablate heads, remove or shuffle the
positions, look a token up as another; in a mixture-of-experts model disable an expert or send a
token to one) and see what changes: the intervened forward pass runs
in a worker beside the session's clean trace, which is left as it is; at the selected token the
tab shows which next tokens gained or lost probability, how far each hidden state moved, and
the difference at every stage and layer (ui/interventions/difference_map.py; a click opens that stage in the
Stepper). A chip line names the active interventions; Clear removes them all.

The interventions and their trace belong to the session (state/session.py), which re-runs the pass
whenever the clean trace changes and lets the Stepper show it; this tab sets them and draws."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QGridLayout, QHBoxLayout,
                               QLabel, QPushButton, QSpinBox, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from ...core.model import interventions as lib
from ...core.analysis import readouts
from ..connections import Connections
from .difference_map import DifferenceMap
from ..plots import Bars
from ..session import Session
from ...core.analysis.labels import readable

TOP_CHANGES = 6
MAX_HEADS_WIDTH = 560       # beyond this (a model of 16+ heads), the head grid scrolls


class InterventionsView(QWidget):
    resultReady = Signal()               # an intervened trace is in and drawn
    failed = Signal(str)

    def __init__(self, session: Session, settings=None, parent: Optional[QWidget] = None,
                 show_stepper: Optional[Callable[[], None]] = None) -> None:
        super().__init__(parent)
        self.session = session
        self.show_stepper = show_stepper        # the window's: bring the Stepper tab forward
        self._drawn_result = None
        outer = QHBoxLayout(self)
        controls = QVBoxLayout()
        outer.addLayout(controls, stretch=0)
        controls.addWidget(QLabel("<b>Ablate heads</b> (tick a layer × head cell)"))
        self.heads = QTableWidget()
        self.heads.itemChanged.connect(lambda _: self._changed())
        controls.addWidget(self.heads, stretch=1)
        row = QHBoxLayout()
        row.addWidget(QLabel("replace the head's output by"))
        self.mode = QComboBox()
        self.mode.addItems(["zero", "mean"])
        self.mode.setToolTip("zero: the head adds nothing; mean: its output averaged over positions")
        self.mode.currentIndexChanged.connect(lambda _: self._changed())
        row.addWidget(self.mode)
        controls.addLayout(row)
        self.no_positions = QCheckBox("No positions (no p added, or no rotation)")
        self.shuffle = QCheckBox("Shuffle positions, seed")
        self.seed = QSpinBox()
        self.seed.setRange(0, 10_000)
        shuffle_row = QHBoxLayout()
        shuffle_row.addWidget(self.shuffle)
        shuffle_row.addWidget(self.seed)
        self.swap = QCheckBox("Look up position")
        self.swap_position = QSpinBox()
        self.swap_token = QSpinBox()
        swap_row = QHBoxLayout()
        for widget in (self.swap, self.swap_position, QLabel("as token id"), self.swap_token):
            swap_row.addWidget(widget)
        # one head's softmax sharpened or flattened: softmax(scores / T) in that head only
        self.temper = QCheckBox("Temperature of layer")
        self.temper_layer, self.temper_head = QSpinBox(), QSpinBox()
        self.temper_value = QDoubleSpinBox()
        self.temper_value.setRange(0.05, 20.0)
        self.temper_value.setSingleStep(0.25)
        self.temper_value.setValue(2.0)
        self.temper_value.setToolTip("softmax(scores / T) in that head: T < 1 sharpens, T > 1 flattens")
        temper_row = QHBoxLayout()
        for widget in (self.temper, self.temper_layer, QLabel("head"), self.temper_head,
                       QLabel("T"), self.temper_value):
            temper_row.addWidget(widget)
        controls.addWidget(self.no_positions)
        controls.addLayout(shuffle_row)
        controls.addLayout(swap_row)
        controls.addLayout(temper_row)
        expert_rows = self._expert_controls()
        for row_widget in expert_rows:
            controls.addWidget(row_widget)
        for box in (self.no_positions, self.shuffle, self.swap, self.temper, self.disable, self.force):
            box.toggled.connect(lambda _: self._changed())
        for spin in (self.seed, self.swap_position, self.swap_token, self.temper_layer,
                     self.temper_head, self.temper_value, self.disable_layer, self.disable_expert,
                     self.force_position, self.force_expert, self.force_layer):
            spin.valueChanged.connect(lambda _: self._changed())
        chips = QHBoxLayout()
        self.chips = QLabel("No intervention.")
        self.chips.setWordWrap(True)
        self.clear = QPushButton("Clear")
        self.clear.clicked.connect(self.clear_all)
        chips.addWidget(self.chips, stretch=1)
        chips.addWidget(self.clear)
        controls.addLayout(chips)
        right = QVBoxLayout()
        outer.addLayout(right, stretch=1)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        right.addWidget(self.summary)
        grid = QGridLayout()
        right.addLayout(grid, stretch=1)
        self.changes = Bars("Next-token probability: gained and lost", "change in probability", "",
                            horizontal=True, tokens=False, value_name="intervened − clean")
        self.moved = Bars("How far each hidden state moved at the selected token",
                          "hidden state", "|intervened − clean| / |clean|", tokens=False,
                          value_name="relative change")
        self.stage_map = DifferenceMap(self.open_in_stepper)
        grid.addWidget(self.changes, 0, 0)
        grid.addWidget(self.moved, 1, 0)
        grid.addWidget(self.stage_map, 0, 1, 2, 1)
        # before any intervention (or while one runs): a sentence in place of empty plots
        self.empty = QLabel()
        self.empty.setObjectName("empty_state")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setStyleSheet("color: #444; font-size: 11pt; padding: 24px;")
        grid.addWidget(self.empty, 0, 0, 2, 2)
        grid.setColumnStretch(0, 2)
        grid.setColumnStretch(1, 3)
        for figure in (self.changes, self.moved, self.stage_map.heatmap):
            figure.hovered.connect(self.summary.setToolTip)
        self._connections = Connections([(session.modelChanged, self._on_model),
                                         (session.traceChanged, self._changed),
                                         (session.selectionChanged, self._draw),
                                         (session.interventionsChanged, self._on_intervention),
                                         (session.interventionFailed, self._on_failed)])
        self._on_model()

    def _expert_controls(self) -> list[QWidget]:
        """Mixture-of-experts models: disable an expert of a layer (its router logit −∞), or send a
        position to an expert (in place of its last choice); hidden for other models."""
        self.disable, self.force = QCheckBox("Disable expert"), QCheckBox("Send position")
        self.disable_expert, self.disable_layer = QSpinBox(), QSpinBox()
        self.force_position, self.force_expert, self.force_layer = QSpinBox(), QSpinBox(), QSpinBox()
        self.disable.setToolTip("its router logit is −∞ before the softmax: every token goes to its next best expert")
        self.force.setToolTip("the expert takes the place of the token's last choice, its gate its probability")
        self.expert_rows = []
        for widgets in ((self.disable, self.disable_expert, QLabel("of layer"), self.disable_layer),
                        (self.force, self.force_position, QLabel("to expert"), self.force_expert,
                         QLabel("in layer"), self.force_layer)):
            row_widget = QWidget()
            row = QHBoxLayout(row_widget)
            row.setContentsMargins(0, 0, 0, 0)
            for widget in widgets:
                row.addWidget(widget)
            row.addStretch(1)
            self.expert_rows.append(row_widget)
        return self.expert_rows

    # -- the interventions the controls describe ---------------------------------------------
    def interventions(self) -> tuple:
        chosen = []
        mode = self.mode.currentText()
        for layer in range(self.heads.rowCount()):
            for head in range(self.heads.columnCount()):
                item = self.heads.item(layer, head)
                if item is not None and item.checkState() == Qt.CheckState.Checked:
                    chosen.append(lib.AblateHead(layer, head, mode))
        if self.no_positions.isChecked():
            chosen.append(lib.NoPositions())
        if self.shuffle.isChecked():
            chosen.append(lib.ShufflePositions(self.seed.value()))
        if self.swap.isChecked():
            chosen.append(lib.SwapEmbedding(self.swap_position.value(), self.swap_token.value()))
        if self.temper.isChecked():
            chosen.append(lib.HeadTemperature(self.temper_layer.value(), self.temper_head.value(),
                                              float(self.temper_value.value())))
        if self.disable.isChecked():
            chosen.append(lib.DisableExpert(self.disable_layer.value(), self.disable_expert.value()))
        if self.force.isChecked():
            chosen.append(lib.ForceExpert(self.force_layer.value(), self.force_position.value(),
                                          self.force_expert.value()))
        return tuple(chosen)

    def set_head_ablated(self, layer: int, head: int, ablated: bool = True) -> None:
        self.heads.item(layer, head).setCheckState(Qt.CheckState.Checked if ablated else Qt.CheckState.Unchecked)

    def clear_all(self) -> None:
        self.heads.blockSignals(True)
        for layer in range(self.heads.rowCount()):
            for head in range(self.heads.columnCount()):
                self.heads.item(layer, head).setCheckState(Qt.CheckState.Unchecked)
        self.heads.blockSignals(False)
        for box in (self.no_positions, self.shuffle, self.swap, self.temper, self.disable, self.force):
            box.blockSignals(True)
            box.setChecked(False)
            box.blockSignals(False)
        self._changed()

    def _on_model(self) -> None:
        model = self.session.model
        self.heads.blockSignals(True)
        n_layer, n_head = (model.config.n_layer, model.config.n_head) if model else (0, 0)
        self.heads.setRowCount(n_layer)
        self.heads.setColumnCount(n_head)
        self.heads.setVerticalHeaderLabels([f"layer {l}" for l in range(n_layer)])
        self.heads.setHorizontalHeaderLabels([f"h{h}" for h in range(n_head)])
        for layer in range(n_layer):
            for head in range(n_head):
                item = QTableWidgetItem()
                item.setFlags(Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled)
                item.setCheckState(Qt.CheckState.Unchecked)
                self.heads.setItem(layer, head, item)
        self.heads.resizeColumnsToContents()
        self._fit_heads()
        self.heads.blockSignals(False)
        if model is not None:
            self.swap_token.setRange(0, model.config.n_vocab - 1)
            self.temper_layer.setRange(0, n_layer - 1)
            self.temper_head.setRange(0, n_head - 1)
        moe = model is not None and model.config.is_moe
        for row_widget in self.expert_rows:
            row_widget.setVisible(moe)
        if moe:
            first = next(l for l in range(n_layer) if model.config.is_moe_layer(l))
            for spin in (self.disable_layer, self.force_layer):
                spin.setRange(0, n_layer - 1)
                spin.setValue(first)
            for spin in (self.disable_expert, self.force_expert):
                spin.setRange(0, model.config.n_expert - 1)
        self._changed()
        self._draw()

    def _fit_heads(self) -> None:
        """The grid as wide as all its heads (MiniLM's 12 without a scrollbar), within reason."""
        table = self.heads
        columns = sum(table.columnWidth(c) for c in range(table.columnCount()))
        width = (columns + table.verticalHeader().sizeHint().width() + 2 * table.frameWidth()
                 + table.verticalScrollBar().sizeHint().width())
        table.setMinimumWidth(min(max(width, 240), MAX_HEADS_WIDTH))
        table.setMaximumWidth(max(width, 240))

    # -- running -----------------------------------------------------------------------------
    def _changed(self, *_) -> None:
        trace = self.session.trace
        if trace is not None:
            self.swap_position.setRange(0, trace.n_seq - 1)
            self.force_position.setRange(0, trace.n_seq - 1)
        chosen = self.interventions()
        self.chips.setText("Active: " + lib.describe_all(chosen) if chosen else "No intervention.")
        self.clear.setEnabled(bool(chosen))
        self.session.request_interventions(chosen)      # runs once the controls rest

    @property
    def intervened(self):
        """The intervened trace of the current text (None: none, or still running)."""
        return self.session.intervened_trace

    def run(self) -> None:
        """Hand the controls' interventions to the session, which runs the pass in a worker."""
        chosen = self.interventions()
        self.session.set_interventions(chosen)
        if chosen and self.session.intervention is None and self.session.trace is not None:
            self._draw()                    # says it runs, in place of the plots

    def _on_intervention(self) -> None:
        result = self.session.intervention
        if result is self._drawn_result and (result is not None or not self.session.interventions):
            return
        self._drawn_result = result
        self._draw()                        # the result, or that it runs in place of the plots
        if result is not None:
            self.resultReady.emit()

    def _on_failed(self, message: str) -> None:
        self.summary.setText(f"<span style='color: #b00020;'>⚠ {message}</span> (the clean trace is unchanged)")
        self.failed.emit(message)

    def open_in_stepper(self, key: str, layer: Optional[int], head: Optional[int]) -> None:
        """A difference-map cell clicked: that stage, layer (and head) in the Stepper."""
        session = self.session
        if layer is not None:
            session.set_layer(layer)
        if head is not None:
            session.set_head(head)
        session.set_stage(key)
        if self.show_stepper is not None:
            self.show_stepper()

    # -- drawing -----------------------------------------------------------------------------
    def _draw(self, *_) -> None:
        clean, intervened, session = self.session.trace, self.intervened, self.session
        if clean is None or intervened is None or intervened.n_seq != clean.n_seq:
            self.changes.setVisible(False)
            self.moved.setVisible(False)
            self.stage_map.setVisible(False)
            self.summary.setText("")
            self.empty.setText(
                "Open a model and type a sentence first." if clean is None else
                "Running the intervened forward pass…" if session.interventions else
                "Nothing is switched off yet. Tick a layer × head cell on the left to ablate that "
                "head, or remove, shuffle or swap the positions: the clean and the intervened "
                "passes are then compared here, at the selected token and at every stage.")
            self.empty.setVisible(True)
            return
        self.empty.setVisible(False)
        i = session.selected_token
        labels = session.token_labels()
        self.stage_map.set_data(session.intervention.differences, clean.config, i, labels[i])
        self.stage_map.setVisible(True)
        before, after = clean.hidden_states[:, i], intervened.hidden_states[:, i]
        moved = readouts.movement(before, after)
        names = ["embed"] + [f"layer {l}" for l in range(clean.config.n_layer)]
        self.moved.set_title(f"How far each hidden state of '{labels[i]}' moved")
        self.moved.set_data(moved.astype(np.float32), names)
        self.moved.setVisible(True)
        self.moved_values = moved
        if not clean.has_logits:
            self.changes.setVisible(False)
            self.summary.setText(f"'{labels[i]}': the last hidden state moved by {moved[-1]:.1%} of its length.")
            return
        change = readouts.prediction_change(clean.logits_at(i), intervened.logits_at(i), TOP_CHANGES)
        p_clean, p_after = change.p_clean, change.p_after
        delta = p_after - p_clean
        chosen = list(change.gained) + list(change.lost[::-1])
        tokenizer = session.model.tokenizer
        self.delta_ids = np.array(chosen)
        self.changes.set_title(f"After '{labels[i]}': which next tokens gained and lost probability")
        self.changes.set_data(delta[chosen], [f"{readable(tokenizer.id_to_token(int(t)))} ({int(t)})" for t in chosen],
                              notes=[f"{p_clean[t]:.4f} → {p_after[t]:.4f}" for t in chosen])
        self.changes.setVisible(True)
        top_clean, top_after = change.top_clean, change.top_after
        self.summary.setText(
            f"At <b>'{labels[i]}'</b>: clean prediction <b>'{readable(tokenizer.id_to_token(top_clean))}'</b> "
            f"(p = {p_clean[top_clean]:.3f}) → intervened <b>'{readable(tokenizer.id_to_token(top_after))}'</b> "
            f"(p = {p_after[top_after]:.3f}); the clean one now has p = {p_after[top_clean]:.3f}. "
            f"The last hidden state moved by {moved[-1]:.1%}.")

    def close(self) -> bool:
        self._connections.disconnect_all()
        return super().close()
