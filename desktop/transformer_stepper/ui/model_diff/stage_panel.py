"""A stage view's "A − B" mode: the figures of core/analysis/stage_difference.py for the stage,
layer and head shown — a heatmap of A − B per array the stage computes (diverging colours,
hatched where the mask blocks), A's and B's values side by side where a difference means
nothing (token ids, chosen experts, the most likely tokens), KL per position. The stage view
(ui/stages/base.py) shows this panel in place of its own figures while the session shows A − B;
the difference is computed in a worker and kept for the last stage, layer and head asked."""
from __future__ import annotations

import threading
import weakref
from typing import Callable, Optional

import numpy as np
from PySide6.QtWidgets import QWidget

from ...core.analysis import stage_difference as sd
from ...core.analysis.labels import readable
from ...core.analysis.seq2seq_stage_difference import CROSS_PER_HEAD, SOURCE_COLUMNS, SOURCE_ROWS
from ...core.trace.layer_detail import PER_HEAD
from ..plots import Bars, Heatmap
from ..plots.figure import Figure
from ..reflow import ReflowGrid

# what each array is, in a title ("q (head 2)"); an array not named here is titled by its name
NAMES = {"token_embeddings": "the rows of E looked up", "token_embeddings_scaled": "the rows of E, scaled",
         "position_embeddings": "position encodings", "token_type_embeddings": "token-type embeddings",
         "rope_angles": "rotary angles", "embedding_sum": "e + p", "embedding_output": "the embedding output",
         "attn_in": "x, what the projections read", "q_unrotated": "q before rotation",
         "k_unrotated": "k before rotation", "scores_raw": "q·kᵀ (raw)", "scores": "scores",
         "attn_weights": "attention weights", "head_outputs": "the head's output (weights · V)",
         "heads_concat": "heads side by side", "attn_out": "attention output (· W_O)",
         "attn_residual": "x + attention output", "router_logits": "router logits",
         "router_probs": "router probabilities", "expert_gates": "each token's gate on each expert",
         "mlp_in": "the feed-forward's input", "mlp_pre_act": "before the activation",
         "mlp_act": "after the activation", "mlp_up": "x·W_up", "mlp_gated": "gated hidden units",
         "shared_expert_out": "shared expert's output", "shared_expert_gate": "shared expert's gate",
         "mlp_out": "feed-forward output", "mlp_residual": "+ residual", "layer_out": "the layer's output",
         "final_ln_out": "the final norm's output", "input_ids": "token ids",
         "expert_ids": "the experts chosen (colour: gate)", "top_tokens": "the most likely next tokens",
         "kl": "KL(p_B ‖ p_A) per position",
         # an encoder–decoder's cross-attention (core/analysis/seq2seq_stage_difference.py)
         "cross_attn_in": "the decoder stream the cross-attention reads", "cross_q": "q (decoder stream)",
         "cross_k": "k (each model's encoder output)", "cross_v": "v (each model's encoder output)",
         "cross_scores_raw": "q·kᵀ over the source (raw)", "cross_scores": "scores over the source",
         "cross_attn_weights": "cross-attention weights (the alignment)",
         "cross_head_outputs": "the head's output (weights · V)", "cross_heads_concat": "heads side by side",
         "cross_attn_out": "cross-attention output (· W_O)", "cross_residual": "x + cross-attention output"}
KEY_COLUMNS = ("scores_raw", "scores", "attn_weights")       # [query, key] arrays
CELL_LIMIT = 400
# a click on these has no arithmetic of either model behind it: why, in one line
NO_PROVENANCE = {"input_ids": "token ids are looked up, not computed: there is no arithmetic to take apart",
                 "expert_ids": "the experts chosen are a top-k choice, not a sum: Alt-click a router logit",
                 "top_tokens": "the most likely tokens are a ranking of both models' logits: Alt-click "
                               "the last hidden state's difference instead",
                 "kl": "KL per position is computed from both models' distributions, by neither's forward "
                       "pass: Alt-click a difference of an array either model computes"}


def percent_text(value: float) -> str:
    if np.isinf(value):
        return "∞ (B is all zeros)"
    return f"{value:.3g}"


class DifferenceCache:
    """The last stage difference computed: written by a worker, read by the view; no Qt."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: Optional[tuple] = None

    def get(self, trace_a, trace_b, key: tuple) -> Optional[sd.StageDifference]:
        with self._lock:
            last = self._last
        if last is not None and last[0]() is trace_a and last[1]() is trace_b and last[2] == key:
            return last[3]
        return None

    def compute(self, trace_a, trace_b, key: tuple) -> None:
        shown = sd.stage_difference(trace_a, trace_b, *key)
        with self._lock:
            self._last = (weakref.ref(trace_a), weakref.ref(trace_b), key, shown)


def _per_head(name: str) -> bool:
    return name in PER_HEAD or name in CROSS_PER_HEAD


class DifferencePanel(QWidget):
    """Figures made on first use, one per item name (a pair: two), reused across redraws."""

    def __init__(self, add_figure: Callable[[str, Figure], None], parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.grid = ReflowGrid(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(6)
        self._add_figure = add_figure         # connects hover and clicks (the stage view's)
        self._figures: dict[str, Figure] = {}
        self._placed: list[str] = []
        self.shown: Optional[sd.StageDifference] = None

    def figures(self) -> list[tuple[str, Figure]]:
        return [(f"difference_{key}", self._figures[key]) for key in self._placed]

    def _figure(self, key: str, make: Callable[[], Figure]) -> Figure:
        if key not in self._figures:
            figure = make()
            self._figures[key] = figure
            self._add_figure(f"difference_{key}", figure)
        return self._figures[key]

    def show_difference(self, shown: sd.StageDifference, labels: list[str], tokenizer,
                        names: tuple[str, str], selected: int,
                        source_labels: Optional[list[str]] = None) -> None:
        """`source_labels`: an encoder–decoder's source tokens (the cross-attention's keys)."""
        self.shown = shown
        placed = []
        for item in shown.items:
            if isinstance(item, sd.Delta):
                placed.append(self._draw_delta(item, labels, self._where(shown, item.name), source_labels))
            elif isinstance(item, sd.Pair):
                placed += self._draw_pair(item, labels, tokenizer, names)
            else:
                placed.append(self._draw_per_position(item, labels, selected))
        for key in self._placed:
            if key not in placed:
                self.grid.removeWidget(self._figures[key])
                self._figures[key].setVisible(False)
        columns = 1 if len(placed) == 1 else 2 if len(placed) <= 4 else 3
        for i, key in enumerate(placed):
            self.grid.removeWidget(self._figures[key])
            self.grid.addWidget(self._figures[key], i // columns, i % columns)
            self._figures[key].setVisible(True)
        self._placed = placed
        self.select(selected)

    @staticmethod
    def _where(shown: sd.StageDifference, name: str) -> str:
        parts = ([f"layer {shown.layer}"] if shown.layer is not None else []) + \
            ([f"head {shown.head}"] if shown.head is not None and _per_head(name) else [])
        return f" ({', '.join(parts)})" if parts else ""

    def address(self, key: str, row: int, col: int) -> tuple[Optional[str], tuple]:
        """The trace value under a cell of figure `key`: (array name, index as explain() reads
        it), or (None, (why not, in one line,)) for a figure whose values no model computed."""
        shown = self.shown
        name = key[:-2] if key.endswith(("_A", "_B")) else key
        item = None if shown is None else next((i for i in shown.items if i.name == name), None)
        if not isinstance(item, sd.Delta):
            return None, (NO_PROVENANCE.get(name, "this figure shows no value either model computed"),)
        inner = (row, col)                   # (a 1-D array is drawn as one column: see one_d)
        if shown.layer is None:
            return name, inner
        if _per_head(name):
            return name, (shown.layer, shown.head, *inner)
        return name, (shown.layer, *inner)

    @staticmethod
    def one_d(name: str, index: tuple) -> tuple:
        """The address of a cell of a 1-D array, drawn as one column: its column index dropped."""
        return index[:-1]

    def _draw_delta(self, item: sd.Delta, labels: list[str], where: str,
                    source_labels: Optional[list[str]] = None) -> str:
        keys = item.name in KEY_COLUMNS
        source_keys = source_labels is not None and item.name in SOURCE_COLUMNS
        source_rows = source_labels is not None and item.name in SOURCE_ROWS
        figure = self._figure(item.name, lambda: Heatmap(
            item.name, "source token (key)" if source_keys else "key (the token looked at)" if keys else "dimension",
            "source token" if source_rows else "token", value_label="A − B",
            row_names="query" if keys or source_keys else "source" if source_rows else "token",
            col_names="source" if source_keys else "key" if keys else "dim"))
        size = item.size
        figure.set_title(f"{NAMES.get(item.name, item.name)}{where}: A − B · ‖A − B‖ / ‖B‖ = "
                         f"{percent_text(size.relative)}, max |A − B| = {size.max_abs:.3g}")
        row_labels = source_labels if source_rows else labels
        rows = row_labels if item.delta.shape[0] == len(row_labels) else None
        columns = (source_labels if source_keys and item.delta.shape[1] == len(source_labels) else
                   labels if keys and item.delta.shape[1] == len(labels) else None)
        figure.set_data(item.delta, rows, columns)
        return item.name

    def _draw_pair(self, item: sd.Pair, labels: list[str], tokenizer, names: tuple[str, str]) -> list[str]:
        keys = []
        for side, values, ids, name in (("A", item.a, item.ids_a, names[0]), ("B", item.b, item.ids_b, names[1])):
            key = f"{item.name}_{side}"
            figure = self._figure(key, lambda: Heatmap(
                key, "rank" if item.name == "top_tokens" else "", "token", signed=False,
                value_label="probability" if item.name == "top_tokens" else
                "gate" if item.name == "expert_ids" else "1: the same id in both",
                row_names="token", col_names="rank" if item.name == "top_tokens" else "column"))
            figure.set_title(f"{side} ({name}): {NAMES.get(item.name, item.name)}")
            cells = [[self._cell_name(item.name, int(i), tokenizer) for i in row] for row in ids]
            cols = ([f"#{r + 1}" for r in range(values.shape[1])] if item.name == "top_tokens" else
                    [f"choice {r + 1}" for r in range(values.shape[1])] if item.name == "expert_ids" else ["id"])
            top = max(float(np.max(item.a, initial=0.0)), float(np.max(item.b, initial=0.0)), 1e-6)
            figure.set_data(values, labels, cols, levels=(0.0, top),     # one scale for A and B
                            describe=lambda r, c, cells=cells, values=values, side=side:
                            f"{side}, '{labels[r]}' ({r}), {cols[c]}: {cells[r][c]}, {values[r, c]:.6g}")
            figure.set_cell_labels(cells, CELL_LIMIT)
            keys.append(key)
        return keys

    @staticmethod
    def _cell_name(name: str, value: int, tokenizer) -> str:
        if name == "expert_ids":
            return f"E{value}"
        if name == "input_ids":
            return str(value)
        return readable(tokenizer.id_to_token(value))

    def _draw_per_position(self, item: sd.PerPosition, labels: list[str], selected: int) -> str:
        figure = self._figure(item.name, lambda: Bars(NAMES.get(item.name, item.name), "token", "nats",
                                                      value_name="KL"))
        figure.set_title(f"{NAMES.get(item.name, item.name)}, in nats: mean {float(item.values.mean()):.4g}")
        figure.set_data(item.values, labels, selected)
        return item.name

    def select(self, selected: int) -> None:
        for key in self._placed:
            figure = self._figures[key]
            if isinstance(figure, Heatmap):
                figure.set_highlight(row=selected)
            else:
                figure.set_highlight(selected)
