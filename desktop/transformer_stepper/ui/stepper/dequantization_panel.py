"""The dequantization panel (GGUF models): for a stored tensor of the current layer (or
token_embd / output), a row and a block, the stored integer codes, the block's scale(s) and
min(s), the quant type's formula with the selected weight's numbers, the float32 values they
give and the histogram of the code grid. The numbers come from io/gguf/dequantization.py (tested);
this only draws them. Opened from View, from the weight stages' "Dequantization…" button, and
a click on a weight (the embedding table, W_Q) selects that weight here. A mixture-of-experts
layer's 3-D experts tensors (ffn_gate_exps ...) are read an expert at a time: an expert box
picks the slice, by default the first expert the selected token was routed to in this layer."""
from __future__ import annotations

import html
from typing import Optional

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QDockWidget, QGridLayout, QHBoxLayout, QLabel,
                               QMainWindow, QSpinBox, QTextBrowser, QWidget)

from ...core.model.errors import ModelError
from ...core.analysis.provenance.params import PARAM
from ...io.gguf.dequantization import Readout, readout
from ...io.gguf.weights import is_gguf, layer_tensors, place_of, why_not_gguf
from ..connections import Connections
from ..plots import Bars, Heatmap
from ..reflow import scrolling
from ..session import Session
from ..stages import VIEWS

UNQUANTIZED = ("F32", "F16", "BF16", "F64")


class DequantizationPanel(QWidget):
    def __init__(self, session: Session, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.session = session
        self.readout: Optional[Readout] = None
        self.n_experts = 0                   # experts of the tensor shown (a 3-D experts tensor), else 0
        self._updating = False
        layout = QGridLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        controls = QHBoxLayout()
        self.tensor = QComboBox()
        self.tensor.setToolTip("The stored tensors of the current layer, then token_embd and output")
        self.row, self.block, self.weight = QSpinBox(), QSpinBox(), QSpinBox()
        self.expert = QSpinBox()
        self.expert.setObjectName("dequantization_expert")
        self.expert_label = QLabel("expert")
        controls.addWidget(self.tensor, stretch=1)
        for label, spin in ((self.expert_label, self.expert), ("row", self.row), ("block", self.block),
                            ("weight", self.weight)):
            controls.addWidget(label if isinstance(label, QLabel) else QLabel(label))
            controls.addWidget(spin)
        layout.addLayout(controls, 0, 0, 1, 4)
        self.text = QTextBrowser()           # scrolls: Q6_K lists 16 sub-blocks
        self.text.setObjectName("dequantization_text")
        self.text.setMinimumWidth(380)
        layout.addWidget(self.text, 1, 0)
        self.codes = Heatmap("Stored codes q", "weight in the sub-block", "sub-block", signed=False,
                             value_label="code", row_names="sub-block", col_names="weight", click=None)
        self.values = Heatmap("float32 values w", "weight in the sub-block", "sub-block",
                              value_label="w", row_names="sub-block", col_names="weight", click=None)
        self.histogram = Bars("Code grid: weights per code", "code", "weights", tokens=False,
                              value_name="weights")
        for column, figure in enumerate((self.codes, self.values, self.histogram), start=1):
            layout.addWidget(figure, 1, column)
            layout.setColumnStretch(column, 2)
        layout.setColumnStretch(0, 3)
        self.codes.cellClicked.connect(self._cell_clicked)
        self.values.cellClicked.connect(self._cell_clicked)
        self.tensor.currentIndexChanged.connect(self._tensor_chosen)
        for spin in (self.expert, self.row, self.block, self.weight):
            spin.valueChanged.connect(self._show)
        self._connections = Connections([(session.modelChanged, self._on_model),
                                         (session.layerChanged, self._refill),
                                         (session.selectionChanged, self._follow_token),
                                         (session.traceChanged, self._follow_token),
                                         (session.provenanceRequested, self._weight_clicked),
                                         (session.dequantizationRequested, self.show_param)])
        self._refill()

    # -- choosing -----------------------------------------------------------------------------
    def _on_model(self) -> None:
        self.tensor.clear()                      # a new model: it opens on its own first weight
        self._refill()

    def opening_tensor(self) -> Optional[str]:
        """A new model's first tensor to show: the quantized weight the current stage uses (the
        Q/K/V stage's W_Q, ...), else the layer's first quantized tensor, else its first."""
        model = self.session.model
        sources = layer_tensors(model, self.session.layer)
        quantized = [s for s in sources if s.quant_type not in UNQUANTIZED]
        view = VIEWS.get(self.session.stage_key)
        weight = view.dequantized_weight.format(layer=self.session.layer) if view is not None else ""
        if weight:
            used = next((s for s in quantized if weight in s.params), None)
            if used is not None:
                return used.tensor
        return (quantized or sources)[0].tensor if sources else None

    def _refill(self, *_) -> None:
        """The tensor list of the current layer, keeping the same kind of tensor selected."""
        model = self.session.model
        previous = self.tensor.currentData()
        self._updating = True
        self.tensor.clear()
        if model is not None and is_gguf(model):
            for source in layer_tensors(model, self.session.layer):
                self.tensor.addItem(f"{source.tensor} · {source.quant_type} → {source.params_text()}",
                                    source.tensor)
            leaf = None if previous is None else previous.split(".", 2)[-1]
            match = next((i for i in range(self.tensor.count())
                          if leaf and self.tensor.itemData(i).endswith(leaf)), None)
            if match is None:
                match = max(0, self.tensor.findData(self.opening_tensor()))
            self.tensor.setCurrentIndex(match)
        self._updating = False
        self._tensor_chosen()

    def _tensor_chosen(self, *_) -> None:
        if self._updating:
            return
        model = self.session.model
        if self.tensor.count() == 0:
            self._clear(why_not_gguf(model))
            return
        source = self._source()
        self._set_ranges(source.n_rows - 1, source.n_blocks() - 1, source.n_experts)
        self._show()

    def _source(self):
        return next(s for s in layer_tensors(self.session.model, self.session.layer)
                    if s.tensor == self.tensor.currentData())

    def _set_ranges(self, rows: int, blocks: int, experts: int) -> None:
        self._updating = True
        self.row.setRange(0, rows)
        self.block.setRange(0, blocks)
        self.n_experts = experts
        self.expert.setRange(0, max(0, experts - 1))
        for widget in (self.expert, self.expert_label):
            widget.setVisible(experts > 0)
        if experts:
            self.expert.setValue(self.token_expert())
            self.expert.setToolTip(self._chosen_text())
        self._updating = False

    def chosen_experts(self) -> list[int]:
        """The experts the selected token was routed to in the current layer, best first (from
        the trace's router lists, kept for every layer: nothing is computed); [] if none."""
        trace = self.session.shown_trace
        if trace is None or "expert_ids" not in trace.residual:
            return []
        ids = trace.layer("expert_ids", self.session.layer)
        token = self.session.selected_token
        return [int(e) for e in ids[token]] if 0 <= token < len(ids) else []

    def token_expert(self) -> int:
        """The expert shown by default: the selected token's first chosen one (else 0)."""
        chosen = self.chosen_experts()
        return chosen[0] if chosen else 0

    def _chosen_text(self) -> str:
        chosen = self.chosen_experts()
        if not chosen:
            return "The expert box picks which expert's slice of the 3-D tensor is shown."
        labels = self.session.token_labels()
        token = labels[self.session.selected_token] if self.session.selected_token < len(labels) else ""
        return (f"The selected token {token!r} went to experts {', '.join(map(str, chosen))} in this "
                f"layer; the expert box shows the first by default, and picks any other.")

    def _follow_token(self, *_) -> None:
        """A new token or trace: show the selected token's first expert (3-D tensors only)."""
        if self._updating or self.tensor.count() == 0 or not self.n_experts:
            return
        self._updating = True
        self.expert.setValue(self.token_expert())
        self.expert.setToolTip(self._chosen_text())
        self._updating = False
        self._show()

    def select(self, tensor: str, row: int, block: int, position: int, expert: Optional[int] = None) -> None:
        """Show weight `position` of block `block` of stored row `row` of `tensor` (of expert
        `expert`'s slice, for a 3-D experts tensor)."""
        index = self.tensor.findData(tensor)
        if index < 0:
            return
        self._updating = True
        self.tensor.setCurrentIndex(index)
        self._updating = False
        self._tensor_chosen()
        self._updating = True
        if expert is not None:
            self.expert.setValue(expert)
        self.row.setValue(row)
        self.block.setValue(block)
        self.weight.setValue(position)
        self._updating = False
        self._show()

    def show_param(self, param: str, index=None) -> None:
        """Select the stored place of core weight param[index] (the first weight by default)."""
        model = self.session.model
        if model is None or not is_gguf(model) or param not in model.params:
            return
        index = tuple(index) if index is not None else (0,) * len(model.params.shape(param))
        place = place_of(model, param, index)
        self.select(place.source.tensor, place.row, place.block, place.position, place.expert)

    def _weight_clicked(self, name: str, index) -> None:
        if name.startswith(PARAM):
            self.show_param(name[len(PARAM):], index)

    def _cell_clicked(self, row: int, col: int) -> None:
        if self.readout is not None:
            self.weight.setValue(row * self.readout.values.shape[1] + col)

    # -- drawing ------------------------------------------------------------------------------
    def _show(self, *_) -> None:
        if self._updating or self.tensor.count() == 0:
            return
        expert = self.expert.value() if self.n_experts else None
        try:
            shown = readout(self.session.model, self.tensor.currentData(), self.row.value(),
                            self.block.value(), self.weight.value(), expert)
        except (ModelError, IndexError) as error:
            self._clear(str(error))
            return
        self.readout = shown
        self._updating = True
        self.weight.setRange(0, shown.block.values.size - 1)
        self._updating = False
        self._draw(shown)

    def _draw(self, r: Readout) -> None:
        sub, size = r.values.shape
        k = r.position
        esc = html.escape
        table = ""
        if r.sub_blocks:
            cells = "<tr>" + "".join(f"<th align='right'>{esc(h)}</th>" for h in r.sub_headers) + "</tr>"
            for j, row in enumerate(r.sub_blocks):
                style = " style='background: #ffe0b2;'" if j == k // size else ""
                cells += f"<tr{style}>" + "".join(f"<td align='right'>{esc(c)}</td>" for c in row) + "</tr>"
            table = f"<table cellspacing='0' cellpadding='1' width='100%'>{cells}</table>"
        self.text.setHtml(
            f"<p><b>Weight {k}</b> (sub-block {k // size}): <code>{esc(r.numbers)}</code></p>"
            f"<p><b>Formula</b> <code>{esc(r.formula)}</code></p>"
            f"<p>{esc(r.scales_text)}</p>{table}<p style='color: #555;'>{esc(r.header)}</p>"
            + (f"<p>{esc(self._chosen_text())}</p>" if self.n_experts else ""))
        rows = [str(j) for j in range(sub)]       # sub-blocks by number: one row is "0", not ±0.5
        self.values.set_data(r.values, row_labels=rows)
        self.values.set_highlight(row=k // size, col=k % size)
        self.values.set_title(f"float32 values: w[{k}] = {r.value:.6g}")
        if r.codes is not None:
            self.codes.set_data(r.codes.astype(np.float32), row_labels=rows)
            self.codes.set_highlight(row=k // size, col=k % size)
            self.codes.set_title(f"Stored codes q ({sub} × {size}): q[{k}] = {int(r.block.codes[k])}")
            grid, counts = r.grid
            notes = [f"code {int(g)} → level {label}" for g, label in zip(grid, r.grid_labels)] \
                if r.block.kind.levels_table is not None else None
            self.histogram.set_data(counts, list(r.grid_labels), highlight=int(r.block.codes[k] - grid[0]),
                                    notes=notes)
            self.histogram.set_title(r.grid_title)
            self.histogram.set_axis_labels("code" if notes is None else "level the code picks (codes in order)")
        else:
            self.codes.set_title(r.block.note)
            self.histogram.set_title(r.grid_title)
        self.values.setVisible(True)
        for figure in (self.codes, self.histogram):
            figure.setVisible(r.codes is not None)

    def _clear(self, message: str) -> None:
        self.readout = None
        self.text.setPlainText(message)
        for figure in (self.codes, self.values, self.histogram):
            figure.setVisible(False)

    def close(self) -> bool:
        self._connections.disconnect_all()
        return super().close()


def install_dequantization_dock(window: QMainWindow) -> QDockWidget:
    """A dock at the window's bottom, hidden until asked for; View → Dequantization Panel
    toggles it (disabled, saying why, for a model that is not GGUF)."""
    panel = DequantizationPanel(window.session)
    dock = QDockWidget("Dequantization (GGUF)", window)
    dock.setObjectName("dequantization")
    dock.setWidget(scrolling(panel))      # scrolls inside the dock on a short screen
    window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
    dock.setVisible(False)
    action = dock.toggleViewAction()
    action.setText("&Dequantization Panel")

    def follow_model() -> None:
        reason = why_not_gguf(window.session.model)
        action.setEnabled(not reason)
        action.setToolTip(reason or "The stored codes, scales and formula behind each weight")
        if reason:
            dock.setVisible(False)

    def reveal(*_) -> None:
        if not dock.isVisible():
            dock.setVisible(True)
            window.resizeDocks([dock], [300], Qt.Orientation.Vertical)
        dock.raise_()

    window.session.modelChanged.connect(follow_model)
    window.session.dequantizationRequested.connect(reveal)
    window.view_menu.addAction(action)
    window.view_menu.setToolTipsVisible(True)
    follow_model()
    window.dequantization_dock, window.dequantization_panel = dock, panel
    return dock
