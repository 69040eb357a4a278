"""The Interventions tab's "difference at every stage": stages × layers, each cell the largest
relative change ‖intervened − clean‖ / ‖clean‖ among the arrays the stage computes at that
layer (core/analysis/differences.py), over every token or at the selected one, the number written in the
cell. Read down a column and on to the next, as the forward pass runs: the first coloured cell
is where the intervention bites, the cells after it how it spreads. Stages that run once
(embedding, positions, prediction) sit in the column where they run; the hatched cells have no
such stage. A click on a cell opens that stage and layer in the Stepper (and, for a per-head
stage, the head that changed most)."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ...core.model import stages
from ...core.analysis.differences import Differences, StageGrid, stage_grid
from ...core.model.config import ModelConfig
from ..plots import Heatmap

# short row names (the axis cuts labels at 16 characters)
SHORT = {"embedding": "embedding", "position_encoding": "positions", "position_addition": "e + p",
         "qkv": "q, k, v", "scores": "scores", "softmax": "softmax", "weighted_sum": "weights · V",
         "output_projection": "W_O + residual", "feed_forward": "feed-forward",
         "layer_output": "layer output", "prediction": "prediction", "router": "router",
         "cross_attention": "cross-attn"}
CELL_LABEL_LIMIT = 240           # more cells than this: the numbers are on hover only


def percent(value: float) -> str:
    """A relative change as a short cell label: 0, <0.1%, 3.4%, 27%, ∞."""
    if np.isnan(value):
        return ""
    if np.isinf(value):
        return "∞"
    if value == 0:
        return "0"
    pct = 100 * value
    if pct < 0.1:
        return "<0.1%"
    return f"{pct:.1f}%" if pct < 10 else f"{pct:.0f}%"


class DifferenceMap(QWidget):
    """Heatmap plus its "over every token / at the selected token" choice. `open_cell(stage key,
    layer or None, head or None)` is called on a click."""

    scopeChanged = Signal()

    def __init__(self, open_cell: Optional[Callable[[str, Optional[int], Optional[int]], None]] = None,
                 parent: Optional[QWidget] = None, name: str = "") -> None:
        super().__init__(parent)
        self.open_cell = open_cell
        self.name = name                  # a stack's name before the title (encoder–decoders)
        self._stage_list = None           # the rows' stages (None: the config's)
        self.grid: Optional[StageGrid] = None
        self._differences: Optional[Differences] = None
        self._config: Optional[ModelConfig] = None
        self._token = ""
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("Difference at every stage,"))
        self.scope = QComboBox()
        self.scope.addItems(["over every token", "at the selected token"])
        self.scope.setToolTip("‖Δ‖ / ‖clean‖ of the whole array, or of the selected token's slice "
                              "(its row; its query row of the attention arrays)")
        self.scope.currentIndexChanged.connect(lambda _: self._redraw())
        self.scope.currentIndexChanged.connect(lambda _: self.scopeChanged.emit())
        row.addWidget(self.scope)
        row.addStretch(1)
        layout.addLayout(row)
        self.heatmap = Heatmap("Where the intervention bites", "layer", "stage", signed=False,
                               value_label="‖Δ‖ / ‖clean‖", row_names="stage", col_names="layer",
                               click=None)
        self.heatmap.cellClicked.connect(self._clicked)
        layout.addWidget(self.heatmap, stretch=1)

    @property
    def position(self) -> Optional[int]:
        return None if self.scope.currentIndex() == 0 or self._token == "" else self._position

    def set_data(self, differences: Differences, config: ModelConfig, position: int, token: str,
                 stage_list=None) -> None:
        """`stage_list`: the rows' stages in order (an encoder–decoder's decoder adds
        Cross-attention); None: the config's."""
        self._differences, self._config, self._stage_list = differences, config, stage_list
        self._position, self._token = position, token
        self._redraw()

    def _redraw(self) -> None:
        if self._differences is None:
            return
        self.grid = grid = stage_grid(self._differences, self._config, self.position, self._stage_list)
        finite = grid.values[np.isfinite(grid.values)]
        top = float(finite.max()) if finite.size else 0.0
        top = top if top > 0 else 1.0
        shown = np.where(np.isinf(grid.values), top, grid.values)      # ∞ (a zero clean norm): darkest
        by_stage = self._by_stage()
        rows = [f"{by_stage[key].number_for(self._config)} {SHORT.get(key, by_stage[key].title)}"
                for key in grid.stages]
        cols = [f"layer {l}" for l in range(self._config.n_layer)]
        self.heatmap.set_data(shown, rows, cols, levels=(0.0, top), describe=self._describe)
        names = [[percent(v) for v in row] for row in grid.values]
        self.heatmap.set_cell_labels(names, CELL_LABEL_LIMIT, width=6)
        where = "over every token" if self.position is None else f"at '{self._token}'"
        named = f"{self.name}: where" if self.name else "Where"
        self.heatmap.set_title(f"{named} the intervention bites: ‖intervened − clean‖ / ‖clean‖ {where}")

    def _by_stage(self) -> dict:
        return {s.key: s for s in (self._stage_list or stages.STAGES)}

    def _describe(self, row: int, col: int) -> str:
        grid = self.grid
        key = grid.stages[row]
        stage = self._by_stage()[key]
        cell = grid.cells[row][col]
        if not cell and stage.needs_experts:
            return f"{stage.title}: layer {col} has no router (a dense feed-forward)"
        if not cell:
            return f"{stage.title}: runs once, not in layer {col} (its cell is in the first or last column)"
        where = f"layer {col}, " if stage.per_layer else ""
        scope = "over every token" if grid.position is None else f"at '{self._token}'"
        lines = [f"{stage.number_for(self._config)}. {stage.title} ({where}{scope}); click to open it in the "
                 f"Stepper"]
        for d in cell:
            relative, max_abs = d.at(grid.position)
            lines.append(f"  {d.name}: ‖Δ‖/‖clean‖ = {percent(relative) if relative else '0'}"
                         f" ({relative:.4g}), max |Δ| = {max_abs:.4g}")
        head = grid.most_changed_head(row, col) if stage.per_head else None
        if head is not None:
            lines.append(f"  the head that changed most: {head}")
        return "\n".join(lines)

    def _clicked(self, row: int, col: int) -> None:
        grid = self.grid
        if grid is None or self.open_cell is None or not 0 <= row < len(grid.stages):
            return
        stage = self._by_stage()[grid.stages[row]]
        head = grid.most_changed_head(row, col) if stage.per_head else None
        self.open_cell(stage.key, col if stage.per_layer else None, head)
