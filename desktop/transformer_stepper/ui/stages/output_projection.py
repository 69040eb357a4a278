"""9. Output projection and residual: heads side by side, · W_O, + the residual, LayerNorm."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyqtgraph as pg

from ...core.analysis import readouts
from ...core.analysis.labels import NORM_LABELS
from ..plots import Bars, Heatmap
from .base import StageView


def _heatmap(title: str) -> Heatmap:
    return Heatmap(title, "dimension", "token", value_label="value", row_names="token", col_names="dim")


class OutputProjectionView(StageView):
    stage_key = "output_projection"
    dequantized_weight = "h.{layer}.attn.o.w"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.concat = self.add_figure("heads_concat", _heatmap("Heads side by side (concat)"), 0, 0,
                                      explain=self.cell("heads_concat"))
        yield
        self.projected = self.add_figure("attention_output", _heatmap("· W_O + b_O"), 0, 1,
                                         explain=self.cell("attn_out"))
        yield
        self.change = self.add_figure("attention_change", Bars(
            "How much attention changes each token: |attn out| / |x|", "token", "ratio",
            value_name="|attn out| / |x|"), 0, 2)
        yield
        self.residual = self.add_figure("residual", _heatmap("x + attention output"), 1, 0,
                                        explain=self.cell("attn_residual"))
        yield
        self.norm = self.add_figure("layernorm", _heatmap("LayerNorm"), 1, 1,
                                    explain=lambda r, c: (f"{self.norm_name}_out", (self.session.layer, r, c)))
        yield
        self.norm_effect = self.add_figure("layernorm_effect", Bars(
            "Length of each token's vector before → after LayerNorm", "token", "|vector|",
            value_name="length after LayerNorm"), 1, 2)
        # the heads' boundaries: one item of vertical segments (32 heads: 31 InfiniteLines,
        # 0.1-0.2 s to make on the GUI thread, were one item each)
        self.head_lines = pg.PlotCurveItem(pen=pg.mkPen("#000", width=1, style=pg.QtCore.Qt.PenStyle.DashLine),
                                           connect="pairs")
        self.concat.plot.addItem(self.head_lines)

    def _head_boundaries(self, n_head: int, d_head: int, n_seq: int) -> None:
        x = np.repeat((np.arange(1, n_head) * d_head - 0.5).astype(np.float32), 2)
        y = np.tile(np.array([-0.5, n_seq - 0.5], dtype=np.float32), n_head - 1)
        self.head_lines.setData(x=x, y=y, connect="pairs")

    def update_data(self) -> None:
        trace, layer = self.trace, self.session.layer
        config = trace.config
        self.concat.set_title(f"{config.n_head} heads × {config.d_v} side by side, layer {layer}")
        self.concat.set_data(self.layer_array("heads_concat"), self.labels)
        self._head_boundaries(config.n_head, config.d_v, trace.n_seq)
        self.projected.set_title(f"Attention output: concat · W_O + b_O ({config.d_model} × {config.d_model})")
        self.projected.set_data(self.layer_array("attn_out"), self.labels)
        branch_out = config.norms_branch_output
        self.residual.set_title("Residual: x + post_attn_ln(attention output)" if branch_out else
                                "Residual: x + attention output" + (
                                    " (parallel residual: the feed-forward does not read this; it reads x too)"
                                    if config.parallel_residual else ""))
        self.residual.set_data(self.layer_array("attn_residual"), self.labels)
        # post-LN (BERT): ln_1 follows this residual; pre-LN (GPT-2): ln_2 normalises it for the
        # MLP; Gemma 2/3 and OLMo 2: post_attn_ln normalises the attention output before the add
        norm, role = (("post_attn_ln", "the attention output, normalised before the add")
                      if branch_out else
                      ("ln_1", "the new residual stream") if config.norm == "post" else
                      ("ln_2", "the feed-forward's input, of the layer's input x (parallel)") if config.parallel_residual else
                      ("ln_2", "the feed-forward's input (the stream stays as it is)"))
        self.norm_name = norm
        self.norm.set_title(f"{NORM_LABELS[config.norm_kind]} {norm}: {role}")
        self.norm.set_data(self.layer_array(f"{norm}_out"), self.labels)
        self.projection = readouts.output_projection_readout(
            self.layer_array("layer_in"), self.layer_array("attn_out"),
            self.layer_array(f"{norm}_in"), self.layer_array(f"{norm}_out"))
        r = self.projection
        self.change.set_data(r.ratios, self.labels, self.selected)
        self.norm_effect.set_data(r.after, self.labels, self.selected,
                                  notes=[f"before: {b:.4g}, after: {a:.4g}" for b, a in zip(r.before, r.after)])

    def update_selection(self) -> None:
        i = self.selected
        for figure in (self.concat, self.projected, self.residual, self.norm):
            figure.set_highlight(row=i)
        self.change.set_highlight(i)
        self.norm_effect.set_highlight(i)

    def stage_values(self) -> dict:
        i, r = self.selected, self.projection
        normalized = self.layer_array(f"{self.norm_name}_normalized")[i]
        return {"ratio": f"{float(r.ratios[i]):.3f}", "norm_name": self.norm_name,
                "len_before": f"{float(r.before[i]):.3g}", "len_after": f"{float(r.after[i]):.3g}",
                "ln_mean": f"{float(normalized.mean()):.2g}", "ln_std": f"{float(normalized.std()):.4f}",
                "mean_ratio": f"{r.mean_ratio:.3f}"}
