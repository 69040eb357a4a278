"""10. Feed-forward and residual: W1, activation, W2, + the residual, LayerNorm (post-LN); in a
mixture-of-experts layer, the chosen experts' gates and their weighted sum (the Router stage
before it shows how they were chosen)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ...core.analysis import moe_readouts
from ...core.analysis.labels import ACTIVATION_SHORT
from ...core.analysis.hidden_values import cached_hidden_values, hidden_values
from ..plots import Curve, Heatmap, Lines, Scatter
from ..plots.common import PALETTE
from ...core.analysis.labels import NORM_LABELS
from .base import StageView


COUNT_HERE = 1 << 20     # hidden values counted on the GUI thread (~10 ms); more: in a worker


def _heatmap(title: str, x_label: str = "dimension") -> Heatmap:
    return Heatmap(title, x_label, "token", value_label="value", row_names="token",
                   col_names="unit" if x_label != "dimension" else "dim")


class FeedForwardView(StageView):
    stage_key = "feed_forward"
    dequantized_weight = "h.{layer}.mlp.proj.w"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.hidden = self.add_figure("hidden_activations", _heatmap("Hidden activations", "hidden unit"), 0, 0, 1, 2,
            explain=lambda r, c: ("mlp_gated" if self.trace.config.gated_mlp else "mlp_act", (self.session.layer, r, c)))
        yield
        self.distribution = self.add_figure("activation_distributions", Lines(
            "Values before and after the activation (all tokens)", "value", "count (log10)"), 0, 2)
        yield
        self.shape = self.add_figure("activation_function", Scatter(
            "The selected token's hidden units: before vs after", "before the activation",
            "after activation"), 1, 2)
        yield
        self.output = self.add_figure("feed_forward_output", _heatmap("· W2 + b2"), 1, 0,
                                      explain=self.cell("mlp_out"))
        yield
        self.after = self.add_figure("after_residual", _heatmap("+ residual"), 1, 1,
                                     explain=self.cell("layer_out"))

    def prepare_work(self):
        """The distribution of the layer's hidden values, counted in a worker once the layer's
        detail is ready (on the GUI thread it stalled the window: core/analysis/hidden_values.py)."""
        trace, layer = self.trace, self.session.layer
        if trace.n_seq * trace.config.d_ff <= COUNT_HERE or trace.config.is_moe_layer(layer):
            # a few ms: drawn in one go (an MoE layer has no one hidden layer to count)
            return super().prepare_work()
        return super().prepare_work() or self.work_once(
            cached_hidden_values(trace, layer) is not None, hidden_values, trace, layer,
            message=f"Counting layer {layer}'s hidden values…")

    def update_data(self) -> None:
        trace, layer = self.trace, self.session.layer
        config = trace.config
        self.moe_layer = config.is_moe_layer(layer)
        self.distribution.unused = self.shape.unused = self.moe_layer
        hidden_axis = "expert" if self.moe_layer else "hidden unit"
        if getattr(self, "_hidden_axis", "hidden unit") != hidden_axis:   # (a new label re-lays out)
            self._hidden_axis = hidden_axis
            self.hidden.set_axis_labels(hidden_axis)
        if self.moe_layer:
            self._draw_experts()
            return
        act = ACTIVATION_SHORT[config.activation]
        if config.gated_mlp:
            self.hidden.set_title(f"Gated hidden units {act}(x·W_gate) · (x·W_up): "
                                  f"{trace.n_seq} × {config.d_ff}, layer {layer}")
            self.hidden.set_data(self.layer_array("mlp_gated"), self.labels)
        else:
            self.hidden.set_title(f"Hidden activations {act}(x·W1 + b1): {trace.n_seq} × {config.d_ff}, layer {layer}")
            self.hidden.set_data(self.layer_array("mlp_act"), self.labels)
        self.counts = hidden_values(trace, layer)       # (counted in a worker: prepare_work)
        self.draw_in_its_turn(self.distribution, self._draw_distribution)
        down = "· W_down" if config.gated_mlp else "· W2 + b2"
        self.output.set_title(f"Feed-forward output: {down} ({config.d_ff} → {config.d_model})")
        self.output.set_data(self.layer_array("mlp_out"), self.labels)
        self._draw_residual()
        # the scatter's x: what goes into the activation (the gate, for a gated model)
        before = f"before: x·W_gate (the gate, into {act})" if config.gated_mlp else f"before: x·W1 + b1 (into {act})"
        if getattr(self, "_before_label", None) != before:        # (a new label re-lays the plot out)
            self._before_label = before
            self.shape.set_axis_labels(before)
        self.positive_fraction = self.counts.positive_fraction

    def _draw_experts(self) -> None:
        # an MoE layer: which experts each token used, with what gate; their weighted sum
        layer, config = self.session.layer, self.trace.config
        gates = moe_readouts.gate_matrix(self.layer_array("expert_ids"), self.layer_array("expert_gates"),
                                         config.n_expert)
        self.hidden.set_title(f"Mixture of experts, layer {layer}: each token's gate on each of the "
                              f"{config.n_expert} experts (0: not chosen; top {config.n_expert_used})")
        self.hidden.set_data(gates, self.labels, [f"E{e}" for e in range(config.n_expert)])
        shared = ("" if not config.d_shared_expert else
                  " + σ · shared expert" if config.shared_expert_gate else " + shared experts")
        self.output.set_title(f"Feed-forward output: Σ gate · expert(x){shared} ({config.d_expert_ff}-wide "
                              f"experts → {config.d_model})")
        self.output.set_data(self.layer_array("mlp_out"), self.labels)
        self._draw_residual()

    def _draw_residual(self) -> None:
        config = self.trace.config
        if config.parallel_residual:
            self.after.set_title("Parallel residual: x + attention(ln_1(x)) + feed-forward(ln_2(x)) = the "
                                 "layer's output; this feed-forward read ln_2 of the layer's input x, "
                                 "not x + attention")
            self.after.set_data(self.layer_array("mlp_residual"), self.labels)
        elif config.norms_branch_output:      # Gemma 2/3, OLMo 2: the output is normed before the add
            self.after.set_title(f"+ residual: x + post_mlp_ln(feed-forward output) = the layer's output "
                                 f"(post_mlp_ln: {NORM_LABELS[config.norm_kind]} of the output, before the add)")
            self.after.set_data(self.layer_array("mlp_residual"), self.labels)
        elif config.norm == "post":
            self.after.set_title("+ residual, then the norm ln_2 = the layer's output")
            self.after.set_data(self.layer_array("ln_2_out"), self.labels)
        else:
            self.after.set_title("+ residual = the layer's output (pre-LN: no norm here)")
            self.after.set_data(self.layer_array("mlp_residual"), self.labels)

    def _draw_distribution(self) -> None:
        config, counts = self.trace.config, self.counts
        act = ACTIVATION_SHORT[config.activation]
        curves = []
        before = "gate x·W_gate" if config.gated_mlp else "before"
        for name, values, color in ((before, counts.before, PALETTE[0]), (f"after {act}", counts.after, PALETTE[1])):
            curves.append(Curve(name, np.log10(values + 1.0).astype(np.float32), x=counts.edges, color=color,
                                step=True))
        self.distribution.set_curves(curves)

    def update_selection(self) -> None:
        i = self.selected
        for figure in (self.hidden, self.output, self.after):
            figure.set_highlight(row=i)
        if self.moe_layer:
            return
        pre, post = self.layer_array("mlp_pre_act")[i], self.layer_array("mlp_act")[i]
        self.shape.set_title(f"'{self.labels[i]}': each of {len(pre)} hidden units, before vs after")
        self.shape.set_points(pre, post, [f"unit {u}" for u in range(len(pre))], size=5)

    def stage_values(self) -> dict:
        if self.moe_layer:
            trace, layer, i = self.trace, self.session.layer, self.selected
            readout = moe_readouts.router_readout(trace, layer, i)
            return {"n_expert": trace.config.n_expert, "top_k": trace.config.n_expert_used,
                    "chosen": ", ".join(f"E{e} ({g:.3f})" for e, g in zip(readout.experts, readout.gates))}
        post = self.layer_array("mlp_act")[self.selected]
        top = np.argsort(-post)[:3]
        return {"positive_fraction": f"{100 * self.positive_fraction:.0f}%",
                "top_units": ", ".join(f"{int(u)} ({post[u]:.2f})" for u in top)}

    def stage_flags(self) -> dict:
        return {"moe_layer": self.moe_layer}
