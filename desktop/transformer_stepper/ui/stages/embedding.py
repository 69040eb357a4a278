"""2. Embedding lookup: ids -> rows of the embedding table E (one-hot x E = row selection)."""
from __future__ import annotations

from typing import Iterator

import weakref

import numpy as np
import pyqtgraph as pg

from ...core.model.errors import ModelError
from ...core.trace.model import Model
from ...core.model import measures
from ..plots import Bars, Heatmap
from ..plots.common import HIGHLIGHT_PEN, format_value
from ..explain.wording import occurrences
from .base import StageView
from ...core.analysis.labels import readable

MAX_TABLE_ROWS = 2048     # the overview of E shows every k-th row; hover reads the true value
N_NEAREST = 12

_table_cache: "weakref.WeakKeyDictionary[Model, tuple]" = weakref.WeakKeyDictionary()


def _table_summary(model: Model) -> tuple[np.ndarray, np.ndarray]:
    """(every k-th row of E for display, the norm of every row of E), once per model."""
    if model not in _table_cache:
        table = model.params["wte"]
        stride = max(1, -(-len(table) // MAX_TABLE_ROWS))
        norms = np.linalg.norm(table, axis=1)
        # a copy, never a view of a memory-mapped file the plot would read again later
        _table_cache[model] = (np.array(table[::stride], order="C"), norms)
    return _table_cache[model]


def _weight(model: Model, row: int, col: int) -> float:
    # E[row, col] read through the store, which checks its file first (a read of a truncated
    # map would end the process); NaN, shown as such, once the file changed on disk
    try:
        return float(model.params["wte"][row, col])
    except ModelError:
        return float("nan")


class EmbeddingView(StageView):
    stage_key = "embedding"
    dequantized_weight = "wte"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.table = self.add_figure("embedding_table", Heatmap(
            "Embedding table E (lines: this text's rows)", "dimension",
            "token id (row of E)", value_label="value", row_names="id", col_names="dim",
            click=None), 0, 0, 2, 1, explain=lambda r, c: ("param:wte", (r, c)))
        yield
        self.rows = self.add_figure("looked_up_rows", Heatmap(
            "The rows of E for this text's ids", "dimension", "token", value_label="value",
            row_names="token", col_names="dim"), 0, 1,
            explain=lambda r, c: ("token_embeddings", (r, c)))
        yield
        self.vector = self.add_figure("selected_vector", Bars(
            "Embedding vector of the selected token", "dimension", "value", tokens=False), 1, 1)
        yield
        self.nearest = self.add_figure("nearest_tokens", Bars(
            "Nearest rows of E to the selected token (cosine)", "cosine similarity", "",
            horizontal=True, tokens=False, value_name="cosine"), 0, 2, 2, 1)
        self.marks = pg.PlotDataItem(connect="pairs", pen=pg.mkPen("#000", width=1))
        self.table.plot.addItem(self.marks)
        self.selected_mark = pg.PlotDataItem(pen=HIGHLIGHT_PEN)
        self.table.plot.addItem(self.selected_mark)
        self.grid.setColumnStretch(0, 2)
        self.grid.setColumnStretch(1, 3)
        self.grid.setColumnStretch(2, 2)
        self._table_model = None

    def prepare_work(self):
        """E's overview and row norms, once per model, in a worker: the first read of a
        30,522-row table (mapped from the weights file) took 0.2 s on the GUI thread."""
        model = self.session.model
        return super().prepare_work() or self.work_once(
            model in _table_cache, _table_summary, model,
            message="Reading the embedding table E (once per model)…")

    def update_data(self) -> None:
        model, trace = self.session.model, self.trace
        if self._table_model is not model:
            strided, _ = _table_summary(model)
            table = model.params["wte"]
            self.table.set_data(strided, extent=table.shape,
                                exact=lambda r, c: _weight(model, r, c),
                                describe=self._describe_table_cell)
            self._table_model = model
        width = trace.config.d_model
        ids = trace.input_ids.astype(float)
        xs = np.tile([-0.5, width - 0.5], len(ids))
        self.marks.setData(xs, np.repeat(ids, 2))
        self.rows.set_data(trace["token_embeddings"], self.labels)

    def _describe_table_cell(self, row: int, col: int) -> str:
        model = self.session.model
        token = readable(model.tokenizer.id_to_token(row))
        value = format_value(_weight(model, row, col))
        used = " (used by this text)" if row in set(self.trace.input_ids.tolist()) else ""
        return f"row {row} '{token}'{used}, dim {col}: {value}"

    def update_selection(self) -> None:
        model, trace, i = self.session.model, self.trace, self.selected
        width = trace.config.d_model
        token_id = int(trace.input_ids[i])
        self.selected_mark.setData([-0.5, width - 0.5], [token_id, token_id])
        self.rows.set_highlight(row=i)
        vector = trace["token_embeddings"][i]
        self.vector.set_title(f"Row {token_id} of E: the vector of '{self.labels[i]}'")
        self.vector.set_data(vector, [f"dim {d}" for d in range(width)], label_axis=False)
        _, norms = _table_summary(model)
        ids, cosines = measures.nearest_rows(model.params["wte"], norms, vector, N_NEAREST + 1)
        keep = ids != token_id
        ids, cosines = ids[keep][:N_NEAREST], cosines[keep][:N_NEAREST]
        self.nearest.set_title(f"Nearest rows of E to '{self.labels[i]}' (cosine)")
        self.nearest.set_data(cosines, [f"{readable(model.tokenizer.id_to_token(t))} ({t})" for t in ids],
                              value_range=(min(0.0, float(cosines.min(initial=0))), 1.0))
        self._nearest_words = [readable(model.tokenizer.id_to_token(t)) for t in ids[:3]]

    def stage_values(self) -> dict:
        trace, i = self.trace, self.selected
        same = [j for j in range(trace.n_seq) if trace.input_ids[j] == trace.input_ids[i]]
        return {"nearest": ", ".join(f"'{w}'" for w in getattr(self, "_nearest_words", [])),
                "occurrences": occurrences(same)}

    def stage_flags(self) -> dict:
        trace, i = self.trace, self.selected
        return {"repeated": int(np.count_nonzero(trace.input_ids == trace.input_ids[i])) > 1,
                "nearest": bool(getattr(self, "_nearest_words", []))}
