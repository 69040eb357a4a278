"""5. Q/K/V projection: x·W + b for the selected layer, split into heads; the selected head."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ...core.model import params as params_lib
from ..plots import Heatmap
from .base import StageView


class QKVView(StageView):
    stage_key = "qkv"
    dequantized_weight = "h.{layer}.attn.q.w"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.x = self.add_figure("attention_input", Heatmap(
            "x: what the projections read", "dimension", "token", value_label="value",
            row_names="token", col_names="dim"), 0, 0, 1, 2, explain=self.cell("attn_in"))
        self.w = self.add_figure("query_weights", Heatmap(
            "W_Q: this head's columns", "head dimension", "input dimension", value_label="weight",
            row_names="input dim", col_names="head dim", click=None), 0, 2,
            explain=lambda r, c: (f"param:h.{self.session.layer}.attn.q.w", (r, self.head_columns().start + c)))
        yield
        self.q = self.add_figure("q", Heatmap("q = x·W_Q + b_Q (this head)", "head dimension",
                                              "token", value_label="value", row_names="token",
                                              col_names="head dim"), 1, 0, explain=self.head_cell("q"))
        self.k = self.add_figure("k", Heatmap("k = x·W_K + b_K (this head)", "head dimension",
                                              "token", value_label="value", row_names="token",
                                              col_names="head dim"), 1, 1, explain=self.head_cell("k"))
        yield
        self.v = self.add_figure("v", Heatmap("v = x·W_V + b_V (this head)", "head dimension",
                                              "token", value_label="value", row_names="token",
                                              col_names="head dim"), 1, 2, explain=self.head_cell("v"))

    def head_columns(self) -> slice:
        d_head = self.trace.config.d_head
        return slice(self.session.head * d_head, (self.session.head + 1) * d_head)

    def update_data(self) -> None:
        trace, layer, head = self.trace, self.session.layer, self.session.head
        config = trace.config
        where = f"layer {layer}, head {head}"
        before = "after ln_1" if config.norms_branch_input else "the layer input"
        self.x.set_title(f"x: what the projections read ({before}), layer {layer}")
        self.x.set_data(self.layer_array("attn_in"), self.labels)
        # a copy of the head's columns only (a GGUF dequantizes only their rows: on the GUI thread)
        weights = params_lib.columns(self.session.model.params, f"h.{layer}.attn.q.w", self.head_columns())
        self.w.set_title(f"W_Q columns {self.head_columns().start}–{self.head_columns().stop - 1} ({where})")
        self.w.set_data(weights)
        for figure, name in ((self.q, "q"), (self.k, "k"), (self.v, "v")):
            formula = f"x·W_{name.upper()}" + (f" + b_{name.upper()}" if config.qkv_bias else "")
            if config.qk_norm and name != "v":
                formula = (f"RMSNorm over all heads({formula})" if config.qk_norm_over == "projection"
                           else f"RMSNorm({formula})")
            if config.has_rope(layer) and name != "v":
                formula = f"rotate({formula}, pos)"
            shared = ""
            if name != "q" and config.group_size > 1:
                kv = config.kv_head_of(head)
                first = kv * config.group_size
                shared = (f"; K/V head {kv}, shared by query heads {first}–{first + config.group_size - 1}")
            nope = "; no rotary on this layer (NoPE)" if config.position == "rotary" and not config.has_rope(layer) \
                and name != "v" else ""
            figure.set_title(f"{name} = {formula} ({where}{shared}{nope})")
            figure.set_data(self.head_array(name), self.labels)

    def update_selection(self) -> None:
        for figure in (self.x, self.q, self.k, self.v):
            figure.set_highlight(row=self.selected)

    def stage_values(self) -> dict:
        q = self.head_array("q")[self.selected]
        k = self.head_array("k")[self.selected]
        config = self.trace.config
        kv = config.kv_head_of(self.session.head)
        return {"q_norm": f"{float(np.linalg.norm(q)):.2f}", "k_norm": f"{float(np.linalg.norm(k)):.2f}",
                "col_start": self.head_columns().start, "col_stop": self.head_columns().stop - 1,
                "kv_head": kv, "group_size": config.group_size, "n_kv_heads": config.n_kv_heads,
                "group_first": kv * config.group_size,
                "group_last": (kv + 1) * config.group_size - 1}
