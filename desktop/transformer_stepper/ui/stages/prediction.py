"""12. Prediction (models with an LM head): logits -> probabilities over the vocabulary."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from ...core.model.errors import ModelError
from ...core.trace.generate import distribution, predictions, predictions_ready
from ...core.model import measures
from ..plots import Bars, Heatmap
from ..plots.common import format_value
from .base import StageView
from ...core.analysis.labels import readable

TOP_K = 10
TOP_PER_POSITION = 5
MAX_CELL_TEXTS = 64 * TOP_PER_POSITION     # beyond this, names only on hover


class PredictionView(StageView):
    stage_key = "prediction"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        # tokens=True: a click on a bar reaches _bar_clicked (at the last position of a decoder
        # it appends that token: the user steers the generation)
        self.top = self.add_figure("top_tokens", Bars(
            "Most likely tokens", "probability", "", horizontal=True, tokens=True,
            value_name="probability"), 0, 0, on_click=self._bar_clicked,
            explain=lambda r, _: ("logits", (self.selected, int(self._bar_ids[r]))))
        self.cut_line = pg.InfiniteLine(angle=0, pen=pg.mkPen("#b00020", width=1.5, style=Qt.PenStyle.DashLine),
                                        label="cut-off", labelOpts={"position": 0.9, "color": "#b00020"})
        self.top.plot.addItem(self.cut_line)
        self._bar_ids = np.zeros(0, dtype=np.int64)
        self.listen(self.session.generation.changed, self._on_data)
        yield
        self.table = self.add_figure("top_per_position", Heatmap(
            "Top predictions at every position", "rank", "position", signed=False,
            value_label="probability", row_names="position", col_names="rank"), 0, 1,
            explain=lambda r, c: ("logits", (r, int(self.top_ids[r, c]))))
        self.grid.setColumnStretch(0, 2)
        self.grid.setColumnStretch(1, 3)

    def prepare_work(self):
        # every position's top tokens: n_seq rows of the vocabulary product, in a worker; the
        # logit lens's final row, from the cache the lens view shares (computed once for both)
        trace, model = self.trace, self.session.model
        return self.work_once(predictions_ready(trace, model), predictions, trace,
                              TOP_PER_POSITION, model, message=(
                                  f"Computing the predictions ({trace.n_seq} positions × "
                                  f"{trace.config.n_vocab:,} tokens)…"))

    def update_data(self) -> None:
        trace, model = self.trace, self.session.model
        top = predictions(trace, TOP_PER_POSITION, model)     # ready: prepare_work made it
        self.top_ids, self.top_probs = top.ids[:, :TOP_PER_POSITION], top.probabilities[:, :TOP_PER_POSITION]
        self.top_names = [[readable(model.tokenizer.id_to_token(t)) for t in row] for row in self.top_ids]
        causal = trace.config.causal
        self.table.set_title("Top next tokens after each position" if causal
                             else "What the masked-LM head predicts at each position")
        self.table.set_data(self.top_probs, self.labels, [f"#{r + 1}" for r in range(TOP_PER_POSITION)],
                            levels=(0.0, 1.0), describe=self._describe)
        self.table.set_cell_labels(self.top_names, MAX_CELL_TEXTS)

    def _describe(self, row: int, col: int) -> str:
        return (f"position {row} '{self.labels[row]}', rank {col + 1}: "
                f"'{self.top_names[row][col]}' (id {int(self.top_ids[row, col])}), "
                f"p = {format_value(float(self.top_probs[row, col]))}")

    def data_key(self) -> tuple:
        return super().data_key() + (self.session.generation.sampling,)

    def _no_distribution(self, i: int, label: str, why: str) -> None:
        self.top.set_data(np.zeros(0), [])
        self.cut_line.setVisible(False)
        self.top.set_title(f"After {i} '{label}': {why}")
        self._bar_ids = np.zeros(0, dtype=np.int64)
        self._best = ("(none)", float("nan"))

    def update_selection(self) -> None:
        i = self.selected
        model, trace = self.session.model, self.trace
        self.table.set_highlight(row=i)
        label = self.labels[i]
        if model.can_generate:
            # the distribution a generation step draws from: softmax(logits / T), cut by top-k
            # and top-p (greedy: T = 1, nothing cut, the first bar is taken)
            sampling = self.session.generation.sampling
            try:
                dist = distribution(trace.logits_at(i), sampling)
            except ModelError as exc:       # every logit NaN/Inf (corrupt weights): say so
                self._no_distribution(i, label, str(exc))
                return
            ids = np.argsort(-dist.probabilities, kind="stable")[:TOP_K]
            probs, kept = dist.probabilities[ids], dist.kept[ids]
            chosen = int(trace.input_ids[i + 1]) if i + 1 < trace.n_seq else None
            generated = chosen is not None and bool(trace.generated[i + 1])
            where = [k for k, t in enumerate(ids) if int(t) == chosen]
            notes = [("the next token: " + ("chosen by generation" if generated else "typed") + "; "
                      if int(t) == chosen else "")
                     + (f"sampled with p = {dist.sampled[t]:.3f}" if kept[k] and not sampling.greedy
                        else "cut off by top-k / top-p" if not kept[k] else "")
                     + ("\nclick to append this token" if i == trace.n_seq - 1 else "")
                     for k, t in enumerate(ids)]
            self.top.set_data(probs, [f"{readable(model.tokenizer.id_to_token(t))} ({int(t)})" for t in ids],
                              highlight=where[0] if where else None, muted=~kept, notes=notes,
                              value_range=(0.0, max(float(probs.max(initial=0)), 1e-3)))
            n_kept = int(kept.sum())
            self.cut_line.setVisible(n_kept < len(ids))
            self.cut_line.setPos(n_kept - 0.5)
            settings = "greedy" if sampling.greedy else f"T {sampling.temperature:g}" + \
                (f", top-k {sampling.top_k}" if sampling.top_k else "") + \
                (f", top-p {sampling.top_p:g}" if sampling.top_p < 1 else "")
            then = (f"; {'chose' if generated else 'typed'} '{readable(model.tokenizer.id_to_token(chosen))}'"
                    if chosen is not None else ": click a bar to append")
            self.top.set_title(f"After {i} '{label}' ({settings}){then}")
        else:
            ids, probs = measures.top_k_probabilities(trace.logits_at(i), TOP_K)
            self.top.set_data(probs, [f"{readable(model.tokenizer.id_to_token(t))} ({int(t)})" for t in ids],
                              value_range=(0.0, max(float(probs.max(initial=0)), 1e-3)))
            self.cut_line.setVisible(False)
            self.top.set_title(f"Most likely tokens at position {i} '{label}'")
        self._bar_ids = np.asarray(ids, dtype=np.int64)
        self._best = (readable(model.tokenizer.id_to_token(ids[0])), float(probs[0]))

    def _bar_clicked(self, index: int) -> None:
        trace = self.trace
        if trace is not None and self.selected == trace.n_seq - 1 and 0 <= index < len(self._bar_ids):
            self.session.generation.append(int(self._bar_ids[index]))

    def stage_values(self) -> dict:
        if not hasattr(self, "_best"):     # the predictions are still being computed
            return {"best_next": "…", "best_probability": "…"}
        best, probability = self._best
        return {"best_next": best, "best_probability": f"{probability:.3f}"}
