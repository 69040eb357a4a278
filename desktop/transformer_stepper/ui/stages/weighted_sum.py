"""8. Weighted sum: weights · V. For the selected query, each source token's contribution
weight_j · v_j (computed here from attn_weights and v; the trace stores only their sum), the
sum itself, and what every head made of the same query; beside them what the sum loses: another
weighting w′ with the same output (or, for a short row, w read back from the output), from
core/analysis/sum_readouts.py, computed in a worker."""
from __future__ import annotations

import threading
import weakref
from typing import Iterator, Optional

import numpy as np
import pyqtgraph as pg

from ...core.model import measures
from ...core.analysis.sum_readouts import WeightedSumAnswer, quick_enough, weighted_sum_answer
from ..plots import Bars, Curve, Heatmap, Lines
from ..plots.common import format_value
from .base import StageView
from .weighted_sum_words import answer_values
from ..workers import Task
from shiboken6 import isValid


class Answers:
    """The last answer computed (trace, layer, head, query): written by a worker, read by the
    view; no Qt."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: Optional[tuple] = None

    def get(self, trace, layer: int, head: int, i: int) -> Optional[WeightedSumAnswer]:
        with self._lock:
            last = self._last
        if last is not None and last[0]() is trace and last[1:4] == (layer, head, i):
            return last[4]
        return None

    def compute(self, trace, layer: int, head: int, i: int) -> None:
        answer = weighted_sum_answer(trace, layer, head, i)
        with self._lock:
            self._last = (weakref.ref(trace), layer, head, i, answer)


class WeightedSumView(StageView):
    stage_key = "weighted_sum"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.contributions = self.add_figure("contributions", Heatmap(
            "Contributions weight_j · v_j to the selected query", "head dimension",
            "source token j", value_label="value", row_names="source", col_names="head dim",
            click=None), 0, 0,
            explain=lambda r, c: ("head_outputs", (self.session.layer, self.session.head, self.selected, c)))
        yield
        self.sizes = self.add_figure("contribution_sizes", Bars(
            "Size of each contribution |weight_j · v_j|", "source token j", "length",
            value_name="|weight·v|"), 0, 1)
        yield
        self.all_heads = self.add_figure("weights_every_head", Heatmap(
            "The selected query's weights in every head", "key", "head", signed=False,
            value_label="weight", row_names="head", col_names="key", click="row"), 1, 1,
            on_click=self.session.set_head,
            explain=lambda r, c: ("attn_weights", (self.session.layer, r, self.selected, c)))
        yield
        self.head_outputs = self.add_figure("head_outputs", Heatmap(
            "Every head's output for the selected query", "head dimension", "head",
            value_label="value", row_names="head", col_names="head dim", click="row"), 1, 0,
            on_click=self.session.set_head,
            explain=lambda r, c: ("head_outputs", (self.session.layer, r, self.selected, c)))
        yield
        self.two_weightings = self.add_figure("two_weightings", Lines(
            "w and w′: two weightings, one output", "source token j", "weight", tokens_on_x=True), 0, 2)
        yield
        self.two_outputs = self.add_figure("two_outputs", Heatmap(
            "Σ w_j v_j and Σ w′_j v_j", "head dimension", "", value_label="value",
            row_names="weighting", col_names="head dim", click=None), 1, 2)
        self.answers = Answers()
        self.answer: Optional[WeightedSumAnswer] = None
        self.sum_line = pg.InfiniteLine(angle=0, pen=pg.mkPen("#000", width=2))
        self.contributions.plot.addItem(self.sum_line)

    def prepare_work(self):
        # every head's weights for the selected query: in a layer kept per head (a long text),
        # each head's n² softmax, seconds in all; in a worker, not on the GUI thread
        trace, layer, i = self.trace, self.session.layer, self.selected
        return super().prepare_work() or self.work_once(
            trace.head_rows_ready("attn_weights", layer, i), trace.head_rows, "attn_weights", layer, i,
            message=f"Computing every head's attention weights for token {i} (layer {layer})…")

    def update_data(self) -> None:
        pass              # everything here depends on the selected query

    def update_selection(self) -> None:
        trace, layer, head, i = self.trace, self.session.layer, self.session.head, self.selected
        weights = self.head_array("attn_weights")[i]           # [n_k]
        v = self.head_array("v")                               # [n_k, d_head]
        parts = measures.contributions(weights, v)             # [n_k, d_head]
        output = self.head_array("head_outputs")[i]            # [d_head] = parts.sum(0)
        rows = np.vstack([parts, output[None, :]])
        names = self.labels + ["Σ (output)"]
        token = f"'{self.labels[i]}'"
        self.contributions.set_title(f"weight_j · v_j for query {i} {token} (layer {layer}, head {head}); "
                                     f"last row: their sum")
        self.contributions.set_data(rows, names)
        self.sum_line.setValue(len(parts) - 0.5)
        self.sizes_values = np.linalg.norm(parts, axis=1)
        v_norms = np.linalg.norm(v, axis=1)
        notes = [f"weight {format_value(float(w))} × |v| {format_value(float(n))}"
                 for w, n in zip(weights, v_norms)]
        self.sizes.set_title(f"How much each source adds to {token}: |weight_j · v_j|")
        self.sizes.set_data(self.sizes_values, self.labels, i, notes=notes)
        every_head = trace.head_rows("attn_weights", layer, i)     # [n_head, n_k]
        head_names = [f"head {h}" for h in range(trace.config.n_head)]
        self.all_heads.set_title(f"Weights of {token} in every head of layer {layer} (click: pick head)")
        self.all_heads.set_data(every_head, head_names, self.labels,
                                levels=(0.0, max(float(every_head.max()), 1e-6)))
        self.all_heads.set_highlight(row=head, col=i)
        self.head_outputs.set_title(f"Every head's output for {token} (click: pick head)")
        self.head_outputs.set_data(trace.layer("head_outputs", layer)[:, i, :], head_names)
        self.head_outputs.set_highlight(row=head)
        self._weights = weights
        self._draw_answer(weights, v)

    def _draw_answer(self, weights: np.ndarray, v: np.ndarray) -> None:
        """w beside w′ (another weighting with the same output), or beside ŵ (w read back from
        the output) when the query reads too few keys for another to exist. The answer (a
        linear program) is computed in a worker; the other figures do not wait for it."""
        trace, layer, head, i = self.trace, self.session.layer, self.session.head, self.selected
        answer = self.answers.get(trace, layer, head, i)
        self.answer = answer
        if answer is None:
            self.two_weightings.set_title("w and w′: looking for another weighting with the same output…")
            self.two_weightings.set_curves([])
            self.two_outputs.set_title("Their outputs: computing…")
            n_keys = int(np.count_nonzero(np.nan_to_num(weights) > 0))
            # at once when small (an export draws at once), but never on the GUI thread for a
            # layer kept per head: the answer reads every head's row, each derived when read
            quick = quick_enough(n_keys, v.shape[1]) and layer not in trace.cache.per_head()
            if self.session.inline_work or quick:
                self.answers.compute(trace, layer, head, i)
                return self._draw_answer(weights, v)
            self.session.workers.start(Task(0, self.answers.compute, trace, layer, head, i),
                                       self._answer_done, self._answer_failed)
            return
        w = np.nan_to_num(weights.astype(np.float64))
        if answer.other is not None:
            o, name = answer.other, "w′ (the same output)"
            other = o.weights
            title = (f"w (top '{self.labels[o.original_top]}' {w[o.original_top]:.3f}) and w′ (top "
                     f"'{self.labels[o.top]}' {other[o.top]:.3f}): one output")
        else:
            other, name = answer.recovery.recovered, "ŵ read back from the output"
            title = f"w and ŵ: {answer.n_keys} keys ≤ {answer.d_head + 1}, so the output determines w"
        self.two_weightings.set_title(title)
        self.two_weightings.set_curves([Curve("w (this pass)", w, width=3.0),
                                        Curve(name, other, width=1.6)], self.labels)
        v32 = v.astype(np.float32)
        rows = np.vstack([w.astype(np.float32) @ v32, other.astype(np.float32) @ v32])
        difference = float(np.linalg.norm(rows[1].astype(np.float64) - rows[0]) /
                           max(float(np.linalg.norm(rows[0].astype(np.float64))), 1e-30))
        self.two_outputs.set_title(f"Their outputs Σ w_j v_j: relative difference {difference:.1e}")
        self.two_outputs.set_data(rows, ["Σ w·v", "Σ w′·v" if answer.other is not None else "Σ ŵ·v"])

    def stage_values(self) -> dict:
        i = self.selected
        order = np.argsort(-self.sizes_values)
        top = order[0]
        every_head = self.trace.head_rows("attn_weights", self.session.layer, i)
        favourites = [self.labels[int(j)] for j in every_head.argmax(axis=1)]
        return {"top_source": self.labels[int(top)], "top_weight": format_value(float(self._weights[top])),
                "top_size": f"{float(self.sizes_values[top]):.3f}",
                "head_favourites": ", ".join(f"head {h} → '{w}'" for h, w in enumerate(favourites[:6])),
                "n_distinct_favourites": len(set(favourites)),
                **(answer_values(self.answer, self.labels, self._weights) if self.answer else {})}

    def stage_flags(self) -> dict:
        answer = self.answer
        return {"answer_ready": answer is not None, "sinks": self.trace is not None and self.trace.config.attn_sinks,
                "other_weighting": answer is not None and answer.other is not None,
                "top_changed": answer is not None and answer.other is not None and answer.other.top_changed}

    def waiting_for(self) -> Optional[str]:
        """The explanation quotes the answer: it waits for the worker computing it."""
        waiting = super().waiting_for()
        if waiting is None and self.trace is not None and self.is_current() and self.answer is None:
            return "Looking for another weighting with the same output (a linear program, in the background)."
        return waiting

    def _answer_done(self, *_) -> None:
        if isValid(self) and self.is_current() and self.answer is None:
            self._draw_answer(self.head_array("attn_weights")[self.selected], self.head_array("v"))
            if self.answer is not None:
                self.updated.emit()             # the explanation quotes it

    def _answer_failed(self, _request, message: str, _user_error) -> None:
        if isValid(self):
            self.two_weightings.set_title(f"⚠ {message}")
