"""The Two Models tab's figures, fed from one ModelDiff (core/analysis/model_diff.py): the layers × stages
drift map, each token's drift along the depth, and one head's attention in both models."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ...core.analysis import model_diff
from ..interventions.difference_map import percent
from ..plots import Curve, Heatmap, Lines

CELL_LABEL_LIMIT = 300          # more cells than this: the numbers are on hover only
SHORT = {"q": "q", "k": "k", "v": "v", "attn_weights": "attn", "head_outputs": "heads",
         "attn_out": "W_O", "attn_residual": "+ res", "mlp_out": "FFN", "layer_out": "out",
         # an encoder–decoder's decoder: its cross-attention (core/analysis/seq2seq_diff.py)
         "cross_q": "× q", "cross_k": "× k", "cross_v": "× v", "cross_attn_weights": "× attn",
         "cross_head_outputs": "× heads", "cross_attn_out": "× W_O", "cross_residual": "× + res"}
MAX_LEGEND = 8                  # tokens named in the legend (more: on hover)


class DriftMap(Heatmap):
    """Rows: layers; columns: the stages compared; a cell: ‖a − b‖ / ‖b‖ over every token."""

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__("Where the drift enters: ‖A − B‖ / ‖B‖ per layer and stage", "stage", "layer",
                         signed=False, value_label="‖A − B‖ / ‖B‖", row_names="layer",
                         col_names="stage", click=None, parent=parent)
        self.diff: Optional[model_diff.ModelDiff] = None
        self.stages: tuple[str, ...] = ()

    def show_diff(self, diff: model_diff.ModelDiff) -> None:
        self.diff = diff
        self.stages = tuple(name for name in model_diff.STAGES
                            if any(name in layer.stages for layer in diff.layers))
        values = diff.stage_map(self.stages)
        finite = values[np.isfinite(values)]
        top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        shown = np.where(np.isinf(values), top, values)
        self.set_data(shown, [f"layer {layer.layer}" for layer in diff.layers],
                      [SHORT[name] for name in self.stages], levels=(0.0, top), describe=self._describe)
        self.set_cell_labels([[percent(v) for v in row] for row in values], CELL_LABEL_LIMIT, width=6)

    def stage_at(self, col: int) -> str:
        return self.stages[col] if 0 <= col < len(self.stages) else ""

    def _describe(self, row: int, col: int) -> str:
        layer = self.diff.layers[row]
        name = self.stages[col]
        drift = layer.stages.get(name)
        if drift is None:
            return f"layer {layer.layer}: this model records no {model_diff.STAGE_TITLES[name]}"
        lines = [f"layer {layer.layer}, {model_diff.STAGE_TITLES[name]}: ‖A − B‖ / ‖B‖ = {drift.relative:.4g}, "
                 f"mean cosine {drift.cosine:.6f}"]
        if name == "attn_weights" and len(layer.attention_divergence):
            per_head = ", ".join(f"{h}: {v:.3g}" for h, v in enumerate(layer.attention_divergence))
            lines.append(f"Jensen–Shannon divergence per head (nats): {per_head}")
        lines.append(f"the block adds {layer.added_attention:+.4g} in attention, "
                     f"{layer.added_feed_forward:+.4g} in the feed-forward; click: this layer's attention")
        return "\n".join(lines)


class TokenDrift(Lines):
    """One curve per token: its hidden state's relative drift from the embedding to the output."""

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__("Each token's drift along the depth",
                         "hidden state (emb: the embedding output; Lℓ: block ℓ's output)", "‖A − B‖ / ‖B‖",
                         legend=True, parent=parent)

    def show_diff(self, diff: model_diff.ModelDiff, labels: Sequence[str], selected: int) -> None:
        drift = diff.token_drift()                       # [n_layer + 1, n_seq]
        depth = ["emb"] + [f"L{i}" for i in range(drift.shape[0] - 1)]
        if diff.final_norm is not None:       # HF's last hidden state: after the final norm
            depth[-1] += "+norm"
        curves = []
        for t in range(drift.shape[1]):
            name = f"{t} {labels[t]}" if drift.shape[1] <= MAX_LEGEND or t == selected else ""
            curves.append(Curve(name, np.nan_to_num(drift[:, t], posinf=np.nan), width=3.2 if t == selected else 1.2,
                                color="#e6550d" if t == selected else None))
        self.set_curves(curves, depth)
        self.set_title(f"Each token's drift along the depth (orange: token {selected} '{labels[selected]}')")


class AttentionPair(QWidget):
    """One head's attention weights in A and in B, side by side, on one colour scale; the
    caption above says how far apart they are."""

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.caption = QLabel("The toolbar's layer and head, in both models.")
        self.caption.setWordWrap(True)
        outer.addWidget(self.caption)
        layout = QHBoxLayout()
        outer.addLayout(layout, stretch=1)
        self.a = Heatmap("A", "key", "query", signed=False, value_label="weight",
                         row_names="query", col_names="key", click=None)
        self.b = Heatmap("B", "key", "query", signed=False, value_label="weight",
                         row_names="query", col_names="key", click=None)
        layout.addWidget(self.a)
        layout.addWidget(self.b)

    def show_pair(self, layer: int, head: int, weights_a: np.ndarray, weights_b: np.ndarray,
                  labels: Sequence[str]) -> None:
        for figure, weights, name in ((self.a, weights_a, "A"), (self.b, weights_b, "B")):
            figure.set_data(np.nan_to_num(weights), labels, labels, levels=(0.0, 1.0))
            figure.set_title(f"{name}: layer {layer}, head {head}")

    def figures(self) -> list[Heatmap]:
        return [self.a, self.b]
