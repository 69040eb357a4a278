"""5. Q/K/V projection: x·W + b for the selected layer, split into heads; the selected head. A
latent-attention model (DeepSeek-V2, core/model/mla.py) also shows what its KV cache keeps: each
token's latent c_kv and rotated k_rope, from which every head's k and v are rebuilt."""
from __future__ import annotations

import weakref
from functools import partial
from typing import Iterator, Optional

import numpy as np
from shiboken6 import isValid

from ...core.model import params as params_lib
from ...core.model.params import ParamStore
from ..plots import Heatmap
from ..workers import Task
from .base import StageView

KEPT_HEADS = 8           # head column blocks kept (a GGUF head of a 4096-wide model: 2 MiB)


class HeadColumns:
    """W_Q's columns of one head, read once per (model, layer, head). From a parameter store
    (a GGUF dequantizing the head's rows, a checkpoint widening the matrix behind its lock)
    the read waited on the workers' products on the GUI thread, for seconds on an 8B GGUF while
    a layer was computed: there it runs in a worker. From arrays in memory (npz, the built-in
    model) it is a copy, made at once."""

    def __init__(self) -> None:
        self._model: Optional[weakref.ref] = None      # whose columns are kept
        self._kept: dict[tuple[str, int, int], np.ndarray] = {}
        self._reading: set[tuple[str, int, int]] = set()     # asked of a worker, not yet read

    @staticmethod
    def read_at_once(model) -> bool:
        return not isinstance(model.params, ParamStore)

    @staticmethod
    def read(model, name: str, cols: slice) -> np.ndarray:
        """The columns (in a worker, for a parameter store)."""
        return params_lib.columns(model.params, name, cols)

    def _of(self, model) -> None:
        if self._model is None or self._model() is not model:
            self._model, self._kept, self._reading = weakref.ref(model), {}, set()

    def get(self, model, name: str, cols: slice) -> Optional[np.ndarray]:
        self._of(model)
        return self._kept.get((name, cols.start, cols.stop))

    def start_reading(self, model, name: str, cols: slice) -> bool:
        """A read asked of a worker: False when one is under way already."""
        self._of(model)
        key = (name, cols.start, cols.stop)
        if key in self._reading:
            return False
        self._reading.add(key)
        return True

    def keep(self, model, name: str, cols: slice, value: Optional[np.ndarray]) -> None:
        """(On the GUI thread.) What read() gave (None: it failed), for get()."""
        self._of(model)
        key = (name, cols.start, cols.stop)
        self._reading.discard(key)
        if value is not None:
            while len(self._kept) >= KEPT_HEADS:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = value


class QKVView(StageView):
    stage_key = "qkv"
    dequantized_weight = "h.{layer}.attn.q.w"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.x = self.add_figure("attention_input", Heatmap(
            "x: what the projections read", "dimension", "token", value_label="value",
            row_names="token", col_names="dim"), 0, 0, 1, 2, explain=self.cell("attn_in"))
        yield
        self.w = self.add_figure("query_weights", Heatmap(
            "W_Q: this head's columns", "head dimension", "input dimension", value_label="weight",
            row_names="input dim", col_names="head dim", click=None), 0, 2,
            explain=lambda r, c: (f"param:h.{self.session.layer}.attn.q.w", (r, self.head_columns().start + c)))
        yield
        # latent attention only (hidden otherwise): what the KV cache keeps per token
        self.latent = self.add_figure("kv_latent", Heatmap(
            "c_kv: the latent the KV cache keeps", "latent dimension", "token", value_label="value",
            row_names="token", col_names="latent dim"), 1, 0, 1, 2)
        yield
        self.k_rope = self.add_figure("k_rope", Heatmap(
            "k_rope: the rotated key part every head shares", "rope dimension", "token",
            value_label="value", row_names="token", col_names="rope dim"), 1, 2)
        model = self.session.model       # (update_data sets these again for the model it draws)
        self.latent.unused = self.k_rope.unused = not (model is not None and model.config.is_mla)
        yield
        self.q = self.add_figure("q", Heatmap("q = x·W_Q + b_Q (this head)", "head dimension",
                                              "token", value_label="value", row_names="token",
                                              col_names="head dim"), 2, 0, explain=self.head_cell("q"))
        yield
        self.k = self.add_figure("k", Heatmap("k = x·W_K + b_K (this head)", "head dimension",
                                              "token", value_label="value", row_names="token",
                                              col_names="head dim"), 2, 1, explain=self.head_cell("k"))
        yield
        self.v = self.add_figure("v", Heatmap("v = x·W_V + b_V (this head)", "head dimension",
                                              "token", value_label="value", row_names="token",
                                              col_names="head dim"), 2, 2, explain=self.head_cell("v"))

    @property
    def columns(self) -> HeadColumns:
        if getattr(self, "_columns", None) is None:
            self._columns = HeadColumns()
        return self._columns

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
        # one q matrix: its head's columns (read in a worker from a parameter store: HeadColumns);
        # latent attention shows the cached latent in its place (its k and v come through W_kv_a,
        # a norm and W_kv_b, not one matrix each, and its q may go through a latent too)
        self.w.unused = config.is_mla
        if not self.w.unused:
            self._draw_weights()
        self.latent.unused = self.k_rope.unused = not config.is_mla
        if config.is_mla:
            self._draw_latent(layer, head)
            return
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

    def _draw_latent(self, layer: int, head: int) -> None:
        # multi-head latent attention: the cached latent and rotary part, then the rebuilt k, v
        config = self.trace.config
        r, d_rope, d_nope = config.kv_lora_rank, config.d_rotary, config.d_head - config.d_rotary
        where = f"layer {layer}, head {head}"
        self.latent.set_title(f"c_kv = RMSNorm(x·W_kv_a), {r} numbers a token for all heads: what the "
                              f"KV cache keeps (layer {layer})")
        self.latent.set_data(self.layer_array("kv_latent"), self.labels)
        self.k_rope.set_title(f"k_rope = rotate(x·W_kv_a, pos): {d_rope} numbers a token, cached, "
                              f"shared by every head")
        self.k_rope.set_data(self.layer_array("k_rope"), self.labels)
        q_in = "RMSNorm(x·W_qa)·W_qb" if config.q_lora_rank else "x·W_Q"
        self.q.set_title(f"q = {q_in}, dims {d_nope}–{config.d_head - 1} rotated in pairs ({where})")
        self.k.set_title(f"k = [c_kv·W_kv_b (dims 0–{d_nope - 1}) | k_rope] rebuilt from the cache ({where})")
        self.v.set_title(f"v = c_kv·W_kv_b, {config.d_v} wide, rebuilt from the cache ({where})")
        for figure, name in ((self.q, "q"), (self.k, "k"), (self.v, "v")):
            figure.set_data(self.head_array(name), self.labels)

    def _draw_weights(self) -> None:
        """The head's columns of W_Q: read in a worker unless they are in memory (HeadColumns);
        the other figures do not wait for them."""
        model, layer, cols = self.session.model, self.session.layer, self.head_columns()
        name, where = f"h.{layer}.attn.q.w", f"layer {layer}, head {self.session.head}"
        weights = self.columns.get(model, name, cols)
        if weights is None and (self.session.inline_work or HeadColumns.read_at_once(model)):
            weights = HeadColumns.read(model, name, cols)
            self.columns.keep(model, name, cols, weights)
        if weights is None:
            self.w.set_title(f"W_Q columns {cols.start}–{cols.stop - 1} ({where}): reading…")
            if self.columns.start_reading(model, name, cols):
                self.session.workers.start(Task(0, HeadColumns.read, model, name, cols),
                                           partial(self._weights_read, weakref.ref(model), name, cols),
                                           partial(self._weights_failed, weakref.ref(model), name, cols))
            return
        self.w.set_title(f"W_Q columns {cols.start}–{cols.stop - 1} ({where})")
        self.w.set_data(weights)

    def _weights_read(self, model_ref, name: str, cols: slice, _request, value: np.ndarray) -> None:
        model = model_ref()
        if isValid(self) and model is not None:
            self.columns.keep(model, name, cols, value)
            if self.is_current() and self.session.model is model:
                self._draw_weights()

    def _weights_failed(self, model_ref, name: str, cols: slice, _request, message: str, _user_error) -> None:
        model = model_ref()
        if isValid(self) and model is not None:
            self.columns.keep(model, name, cols, None)
            if self.session.model is model:
                self.w.set_title(f"⚠ W_Q columns: {message}")

    def update_selection(self) -> None:
        for figure in (self.x, self.q, self.k, self.v, self.latent, self.k_rope):
            figure.set_highlight(row=self.selected)

    def stage_values(self) -> dict:
        q = self.head_array("q")[self.selected]
        k = self.head_array("k")[self.selected]
        config = self.trace.config
        kv = config.kv_head_of(self.session.head)
        values = {"q_norm": f"{float(np.linalg.norm(q)):.2f}", "k_norm": f"{float(np.linalg.norm(k)):.2f}",
                  "col_start": self.head_columns().start, "col_stop": self.head_columns().stop - 1,
                  "kv_head": kv, "group_size": config.group_size, "n_kv_heads": config.n_kv_heads,
                  "group_first": kv * config.group_size,
                  "group_last": (kv + 1) * config.group_size - 1}
        if config.is_mla:
            latent = self.layer_array("kv_latent")[self.selected]
            values.update(kv_lora_rank=config.kv_lora_rank, d_rope=config.d_rotary, d_v=config.d_v,
                          d_nope=config.d_head - config.d_rotary,
                          cache_per_token=config.kv_lora_rank + config.d_rotary,
                          mha_cache=config.n_head * (config.d_head + config.d_v),
                          latent_norm=f"{float(np.linalg.norm(latent)):.2f}")
        return values

    def stage_flags(self) -> dict:
        return {"mla": self.trace.config.is_mla}
