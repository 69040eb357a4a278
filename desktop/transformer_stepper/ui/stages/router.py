"""10. Router (mixture-of-experts models): router logits per token × expert, the top-k kept and
their gates, each chosen expert's output for the selected token and the weighted sum (with the
shared expert where there is one), the experts' load per layer over the text and the selected
token's path through every layer's experts."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyqtgraph as pg

from ...core.analysis import moe_readouts
from ..plots import Bars, Heatmap
from .base import StageView



def _markers(figure, size: int) -> pg.ScatterPlotItem:
    # dots over the cells of a heatmap (chosen experts), drawn above the image at any cell size
    dots = pg.ScatterPlotItem(symbol="o", size=size, pen=pg.mkPen("#000", width=1),
                              brush=pg.mkBrush("#ffffff"))
    dots.setZValue(5)
    figure.plot.addItem(dots)
    return dots


class RouterView(StageView):
    stage_key = "router"
    dequantized_weight = "h.{layer}.moe.router.w"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.logits = self.add_figure("router_logits", Heatmap(
            "Router logits", "expert", "token", value_label="logit", row_names="token",
            col_names="expert"), 0, 0, 1, 2, explain=self.cell("router_logits"))
        self.chosen_dots = _markers(self.logits, 6)
        yield
        self.probs = self.add_figure("selected_token_gates", Bars(
            "The selected token's softmax over experts", "expert", "probability", tokens=False,
            value_name="probability"), 0, 2)
        yield
        self.outputs = self.add_figure("chosen_expert_outputs", Heatmap(
            "The selected token's chosen experts", "dimension", "", value_label="value",
            row_names="row", col_names="dim", click=None), 1, 0)
        yield
        self.load_map = self.add_figure("expert_load", Heatmap(
            "Expert load per layer", "expert", "layer", signed=False, value_label="tokens",
            row_names="layer", col_names="expert", click=None), 1, 1)
        self.path_dots = _markers(self.load_map, 9)
        yield
        self.layer_load = self.add_figure("layer_load", Bars(
            "Tokens sent to each expert, this layer", "expert", "tokens", tokens=False,
            value_name="tokens"), 1, 2)

    def update_data(self) -> None:
        trace, layer = self.trace, self.session.layer
        config = trace.config
        self.dense = not config.is_moe_layer(layer)
        self.load = moe_readouts.expert_load(trace, self.selected)
        if self.dense:
            self._draw_dense_layer(layer)
            return
        for figure in (self.logits, self.probs, self.outputs, self.layer_load):
            figure.unused = False
        ids = self.layer_array("expert_ids")
        experts = [f"E{e}" for e in range(config.n_expert)]
        bias = " + b_router" if config.router_bias else ""
        self.logits.set_title(f"Router logits x · W_router{bias} ({trace.n_seq} × {config.n_expert}); "
                              f"○ each token's top {config.n_expert_used}")
        self.logits.set_data(self.layer_array("router_logits"), self.labels, experts,
                             describe=self._describe_logit)
        rows = np.repeat(np.arange(trace.n_seq), ids.shape[1])
        self.chosen_dots.setData(x=ids.ravel().astype(float), y=rows.astype(float))
        counts = self.load.counts[layer]
        self.layer_load.set_title(f"Tokens per expert, layer {layer} "
                                  f"({int((counts == 0).sum())} unused)")
        self.layer_load.set_data(counts.astype(np.float32), experts, muted=counts == 0)
        self._draw_load(experts)

    def _describe_logit(self, row: int, col: int) -> str:
        ids, gates = list(self.layer_array("expert_ids")[row]), self.layer_array("expert_gates")[row]
        logit, prob = self.layer_array("router_logits")[row, col], self.layer_array("router_probs")[row, col]
        chosen = f"chosen, gate {gates[ids.index(col)]:.4f}" if col in ids else "not chosen"
        return (f"token {row} '{self.labels[row]}', expert {col}: logit {logit:.4f}, "
                f"probability {prob:.4f}; {chosen}")

    def _draw_dense_layer(self, layer: int) -> None:
        # a dense layer of an MoE model (Qwen3-MoE's mlp_only_layers): no router here
        for figure in (self.logits, self.probs, self.outputs, self.layer_load):
            figure.unused = True
        self.chosen_dots.setData(x=[], y=[])
        self._draw_load([f"E{e}" for e in range(self.trace.config.n_expert)])
        self.load_map.set_title(f"Layer {layer} has a dense feed-forward (no router); expert load "
                                f"per layer, the selected token's experts marked")

    def _draw_load(self, experts) -> None:
        config, load = self.trace.config, self.load
        counts = np.where(load.moe_layers[:, None], load.counts, np.nan).astype(np.float32)
        rows = [f"{i}" + ("" if load.moe_layers[i] else " dense") for i in range(config.n_layer)]
        self.load_map.set_title("Tokens per expert, every layer; ○ the selected token's path")
        self.load_map.set_data(counts, rows, experts, levels=(0.0, float(max(np.nanmax(counts, initial=1), 1))),
                               describe=self._describe_load)

    def _describe_load(self, row: int, col: int) -> str:
        load = self.load
        if not load.moe_layers[row]:
            return f"layer {row}: a dense feed-forward, no experts"
        chosen = list(load.path[row])
        mark = (f"; '{self.labels[self.selected]}' went here with gate {load.path_gates[row][chosen.index(col)]:.4f}"
                if col in chosen else "")
        return f"layer {row}, expert {col}: {int(load.counts[row, col])} tokens{mark}"

    def update_selection(self) -> None:
        i, layer, config = self.selected, self.session.layer, self.trace.config
        self.load = moe_readouts.expert_load(self.trace, i)
        moe_rows = np.nonzero(self.load.moe_layers)[0]
        path = self.load.path[moe_rows]
        self.path_dots.setData(x=path.ravel().astype(float),
                               y=np.repeat(moe_rows, path.shape[1]).astype(float))
        self.load_map.set_highlight(row=layer)
        if self.dense:
            return
        self.logits.set_highlight(row=i)
        ids, gates = self.layer_array("expert_ids")[i], self.layer_array("expert_gates")[i]
        probs = self.layer_array("router_probs")[i]
        experts = [f"E{e}" for e in range(config.n_expert)]
        unchosen = np.ones(config.n_expert, dtype=bool)
        unchosen[ids] = False
        rule = ("softmax of the chosen logits" if config.router_order == "topk_softmax" else
                "divided by their sum" if config.norm_topk else "not renormalised")
        self.probs.set_title(f"'{self.labels[i]}': softmax over the experts; top {config.n_expert_used} "
                             f"kept (blue), gates {rule}")
        self.probs.set_data(probs, experts, muted=unchosen,
                            notes=[f"chosen, gate {gates[list(ids).index(e)]:.4f}" if e in ids else "not chosen"
                                   for e in range(config.n_expert)])
        self._draw_outputs(i, ids, gates)

    def _draw_outputs(self, i: int, ids, gates) -> None:
        config = self.trace.config
        outputs = self.layer_array("expert_outputs")[:, i]                # [k, d_model]
        rows = [f"E{e} (gate {g:.2f})" for e, g in zip(ids, gates)]
        values = [outputs]
        if config.d_shared_expert:
            values.append(self.layer_array("shared_expert_out")[i][None])
            if config.shared_expert_gate:
                rows.append(f"shared (σ {float(self.layer_array('shared_expert_gate')[i, 0]):.2f})")
            else:
                rows.append("shared experts (no gate)")
        values.append(self.layer_array("mlp_out")[i][None])
        rows.append("Σ = output")
        sum_rule = "Σ gate · expert" + ("" if not config.d_shared_expert else
                                        " + σ · shared" if config.shared_expert_gate else " + shared")
        self.outputs.set_title(f"'{self.labels[i]}': chosen experts' outputs; {sum_rule}")
        self.outputs.set_data(np.concatenate(values), rows)
        self._output_rows = rows

    def stage_values(self) -> dict:
        trace, layer, i = self.trace, self.session.layer, self.selected
        config = trace.config
        values = {"n_expert": config.n_expert, "top_k": config.n_expert_used, "d_expert": config.d_expert_ff,
                  "d_shared": config.d_shared_expert, "layer": layer, "alpha": f"{config.swiglu_alpha:g}",
                  "limit": f"{config.swiglu_limit:g}", "routed_scale": f"{config.routed_scale:g}"}
        if self.dense:
            return values
        readout = moe_readouts.router_readout(trace, layer, i)
        values.update(
            chosen=", ".join(f"E{e} ({g:.3f})" for e, g in zip(readout.experts, readout.gates)),
            probabilities=", ".join(f"{p:.3f}" for p in readout.probabilities),
            chosen_mass=f"{readout.chosen_mass:.3f}", busiest=f"E{readout.busiest}",
            busiest_count=readout.busiest_count, unused=readout.unused,
            shared_gate="" if readout.shared_gate is None else f"{readout.shared_gate:.3f}")
        return values

    def stage_flags(self) -> dict:
        config = self.trace.config
        return {"dense_layer": self.dense, "normalised": config.norm_topk,
                "shared": bool(config.d_shared_expert) and config.shared_expert_gate,
                "shared_ungated": bool(config.d_shared_expert) and not config.shared_expert_gate,
                "routed_scale": config.routed_scale != 1.0,
                "topk_first": config.router_order == "topk_softmax",
                "router_bias": config.router_bias, "clamped": config.clamped_swiglu}
