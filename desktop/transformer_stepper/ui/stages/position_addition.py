"""4. Position addition: x = e + p (+ t), then the embedding LayerNorm where the model has one."""
from __future__ import annotations

from functools import lru_cache

from typing import Iterator, Optional

import numpy as np
import pyqtgraph as pg

from ...core.model import measures
from ...core.analysis import readouts
from ..plots import Bars, Curve, Heatmap, Lines
from ..plots.common import PALETTE
from .base import StageView


class PositionAdditionView(StageView):
    stage_key = "position_addition"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        def heatmap(title: str) -> Heatmap:
            return Heatmap(title, "dimension", "token", value_label="value",
                           row_names="token", col_names="dim")

        self.e = self.add_figure("token_embeddings", heatmap("e: token embeddings"), 0, 0,
                                 explain=lambda r, c: ("token_embeddings", (r, c)))
        yield
        self.p = self.add_figure("position_embeddings", heatmap("p: position vectors"), 0, 1,
                                 explain=lambda r, c: ("position_embeddings", (r, c)))
        yield
        self._heatmap = heatmap
        # t (token types) and q, k turning (rotary) are made for a model that has them: each
        # plot takes 7-14 ms to make
        self.t: Optional[Heatmap] = None
        self.q_turn: Optional[Lines] = None
        self.k_turn: Optional[Lines] = None
        self.sum = self.add_figure("embedding_sum", heatmap("e + p: the sum"), 1, 0,
                                   explain=lambda r, c: ("embedding_sum", (r, c)))
        yield
        self.ln = self.add_figure("embedding_layernorm", heatmap("LayerNorm(e + p + t)"), 1, 1,
                                  explain=lambda r, c: ("embedding_output", (r, c)))
        yield
        self.concat = self.add_figure("concatenation_alternative", heatmap(
            "The alternative: [e | p] concatenated"), 1, 2)
        # where e ends and p begins in [e | p]
        self.boundary = pg.InfiniteLine(angle=90, pen=pg.mkPen("#111", width=2))
        self.concat.plot.addItem(self.boundary)
        yield
        self.magnitude = self.add_figure("magnitude_per_dimension", Lines(
            "Size of e and p per dimension (RMS over tokens)", "dimension", "RMS"), 2, 0, 1, 2)
        yield
        self.cosine = self.add_figure("cosine_e_sum", Bars(
            "cos(e, e + p) per token", "token", "cosine", value_name="cosine"), 2, 2)
        yield
        self._placed_for = None
        config = self.session.model.config if self.session.model is not None else None
        yield from self._figures_for(config is None or config.n_token_types > 0,
                                     config is None or config.position == "rotary")

    def _make_figures(self, types: bool, rotary: bool) -> None:
        """The plots only some models need, made once the first such model is shown."""
        for _ in self._figures_for(types, rotary):
            pass

    def _figures_for(self, types: bool, rotary: bool) -> Iterator[None]:
        """_make_figures one figure a step."""
        if types and self.t is None:
            self.t = self.add_figure("token_type_embeddings", self._heatmap("t: token-type rows"), 0, 2)
            yield
        if rotary and self.q_turn is None:
            self.q_turn = self.add_figure("q_rotation", Lines(
                "q of the selected token: pairs before and after the rotation", "first of pair",
                "second of pair"), 2, 0)
            self.q_turn.plot.setAspectLocked(True)      # a turn must look like a turn
            yield
        if rotary and self.k_turn is None:
            self.k_turn = self.add_figure("k_rotation", Lines(
                "k of the selected token: pairs before and after the rotation", "first of pair",
                "second of pair"), 2, 1)
            self.k_turn.plot.setAspectLocked(True)

    def _place_concat(self) -> None:
        """A model that concatenates: e and p above, x₀ = [e | p] across the row below."""
        if self._placed_for == "concat":
            return
        self._placed_for = "concat"
        for _, figure in self._figures:
            self.grid.removeWidget(figure)
        self.grid.addWidget(self.e, 0, 0)
        self.grid.addWidget(self.p, 0, 1)
        self.grid.addWidget(self.concat, 1, 0, 1, 2)

    def _place(self, has_types: bool, has_norm: bool, rotary: bool = False) -> None:
        """Three figures a row: e, p, [t], sum, [LayerNorm], concatenation, then the cosines
        and the sizes per dimension in what is left (the sizes want two cells). Rotary models:
        e and what enters layer 0, then q and k turning."""
        if self._placed_for == (has_types, has_norm, rotary):
            return
        self._placed_for = (has_types, has_norm, rotary)
        if rotary:
            for _, figure in self._figures:
                self.grid.removeWidget(figure)
            self.grid.addWidget(self.e, 0, 0)
            self.grid.addWidget(self.ln, 0, 1)
            self.grid.addWidget(self.q_turn, 1, 0)
            self.grid.addWidget(self.k_turn, 1, 1)
            return
        heatmaps = [self.e, self.p] + ([self.t] if has_types else []) + [self.sum] \
            + ([self.ln] if has_norm else []) + [self.concat]
        for _, figure in self._figures:
            self.grid.removeWidget(figure)
        for index, figure in enumerate(heatmaps):
            self.grid.addWidget(figure, index // 3, index % 3)
        row, free = len(heatmaps) // 3, (3 - len(heatmaps) % 3) % 3
        if free == 2:
            self.grid.addWidget(self.cosine, row, 1)
            self.grid.addWidget(self.magnitude, row, 2)
        elif free == 1:
            self.grid.addWidget(self.cosine, row, 2)
            self.grid.addWidget(self.magnitude, row + 1, 0, 1, 3)
        else:
            self.grid.addWidget(self.magnitude, row, 0, 1, 2)
            self.grid.addWidget(self.cosine, row, 2)

    def required_layers(self) -> list[int]:
        # rotary models: the rotation is shown on layer 0's own q and k
        return [0] if self.trace.config.position == "rotary" else []

    def update_data(self) -> None:
        config = self.trace.config
        rotary, concat = config.position == "rotary", config.position == "concat"
        self._make_figures(config.n_token_types > 0, rotary)
        for figure in (self.p, self.sum, self.concat, self.magnitude, self.cosine):
            figure.unused = rotary
        for figure in (self.sum, self.magnitude, self.cosine):
            figure.unused = figure.unused or concat
        if self.q_turn is not None:
            self.q_turn.unused = self.k_turn.unused = not rotary
        self.boundary.setVisible(concat)
        if rotary:
            self._update_rotary()
            return
        if concat:
            self._update_concat()
            return
        trace = self.trace
        config = trace.config
        e, p = trace["token_embeddings"], trace["position_embeddings"]
        has_types = config.n_token_types > 0
        self._place(has_types, config.embed_norm)
        # one colour scale for e, p, t and the sum, so sizes compare at a glance
        parts = [e, p] + ([trace["token_type_embeddings"]] if has_types else [])
        limit = max(measures.robust_limit(a) for a in parts + [trace["embedding_sum"]])
        levels = (-limit, limit)
        self.e.set_data(e, self.labels, levels=levels)
        self.p.set_data(p, self.labels, levels=levels)
        if self.t is not None:
            self.t.unused = not has_types
        if has_types:
            self.t.set_data(trace["token_type_embeddings"], self.labels, levels=levels)
        plus = "e + p + t" if has_types else "e + p"
        self.sum.set_title(f"{plus}: the sum")
        self.sum.set_data(trace["embedding_sum"], self.labels, levels=levels)
        self.ln.unused = not config.embed_norm
        if config.embed_norm:
            self.ln.set_title(f"LayerNorm({plus}): the embedding output")
            self.ln.set_data(trace["embedding_output"], self.labels)
        curves = [Curve("e (token)", measures.rms_per_dim(e), color=PALETTE[0]),
                  Curve("p (position)", measures.rms_per_dim(p), color=PALETTE[1])]
        if has_types:
            curves.append(Curve("t (token type)", measures.rms_per_dim(trace["token_type_embeddings"]),
                                color=PALETTE[2]))
        self.magnitude.set_curves(curves)
        self.cosines = measures.cosine_rows(e, trace["embedding_sum"])
        self.cosine.set_title(f"cos(e, {plus}): how much of e survives")
        self.cosine.set_data(self.cosines, self.labels, self.selected, value_range=(min(0.0, float(self.cosines.min())), 1.0))
        self.concat.set_title("The alternative: [e | p] concatenated")
        self.concat.set_data(np.concatenate([e, p], axis=1), self.labels, levels=levels)

    def _update_concat(self) -> None:
        """x₀ = [e | p]: the trace's own concatenation, e's block and p's side by side."""
        trace = self.trace
        config = trace.config
        self._place_concat()
        if self.t is not None:
            self.t.unused = True
        self.ln.unused = True
        e, p = trace["token_embeddings"], trace["position_embeddings"]
        x0 = trace["embedding_concat"]
        limit = max(measures.robust_limit(a) for a in (e, p))       # one colour scale for both
        levels = (-limit, limit)
        self.e.set_title(f"e: token embeddings ({config.d_token} dimensions)")
        self.e.set_data(e, self.labels, levels=levels)
        self.p.set_title(f"p: sinusoids ({config.d_position} dimensions)")
        self.p.set_data(p, self.labels, levels=levels)
        self.concat.set_title(f"x₀ = [e | p]: what enters layer 0 ({config.d_token} + "
                              f"{config.d_position} = {config.d_model} dimensions; the line: where p begins)")
        self.concat.set_data(x0, self.labels, levels=levels)
        self.boundary.setValue(config.d_token - 0.5)

    def _update_rotary(self) -> None:
        trace = self.trace
        config = trace.config
        self._place(False, False, rotary=True)
        if self.t is not None:
            self.t.unused = True
        self.ln.unused = False
        self.e.set_title("e: token embeddings (rows of E)")
        self.e.set_data(trace["token_embeddings"], self.labels)
        scaled = config.embed_scale != 1.0
        self.ln.set_title(f"What enters layer 0: e × {config.embed_scale:.3g} (no position added)" if scaled
                          else "What enters layer 0: e itself (no position added)")
        self.ln.set_data(trace["embedding_output"], self.labels)

    def _update_turns(self) -> None:
        trace, i, head = self.trace, self.selected, self.session.head
        config = trace.config
        half = config.d_rotary // 2
        pairs = measures.shown_pairs(half)
        angles = trace["rope_angles"][i]
        for figure, name in ((self.q_turn, "q"), (self.k_turn, "k")):
            before, after = trace.head_array(f"{name}_unrotated", 0, head)[i], trace.head_array(name, 0, head)[i]
            curves = []
            for n, (pair, (b, a)) in enumerate(zip(pairs, measures.pair_arrows(before, after, pairs, half))):
                color = PALETTE[n % len(PALETTE)]
                curves.append(Curve(f"pair {pair} before", np.array([0, b[1]], np.float32),
                                    x=np.array([0, b[0]], np.float32), color=color, width=1.0))
                curves.append(Curve(f"pair {pair} turned {float(angles[pair]):.2f} rad",
                                    np.array([0, a[1]], np.float32), x=np.array([0, a[0]], np.float32),
                                    color=color, width=3.0))
            partial = (f"; dims {config.d_rotary}–{config.d_head - 1} are not rotated (partial rotary)"
                       if config.d_rotary < config.d_head else "")
            figure.set_title(f"{name} of '{self.labels[i]}' (pos {i}), layer 0, head {head}: "
                             f"pairs before (thin) and after (thick) the rotation{partial}")
            figure.set_curves(curves)

    def update_selection(self) -> None:
        i = self.selected
        for figure in (self.e, self.p, self.t, self.sum, self.ln, self.concat):
            if figure is not None:
                figure.set_highlight(row=i)
        if self.trace.config.position == "rotary":
            self._update_turns()
            return
        if self.trace.config.position != "concat":
            self.cosine.set_highlight(i)

    def stage_values(self) -> dict:
        trace, i = self.trace, self.selected
        if trace.config.position == "rotary":
            q0, q1 = trace.head_array("q_unrotated", 0, self.session.head)[i], trace.head_array("q", 0, self.session.head)[i]
            return {"q_norm_before": f"{float(np.linalg.norm(q0)):.3f}",
                    "q_norm_after": f"{float(np.linalg.norm(q1)):.3f}", "pos": i,
                    "embed_scale": f"{trace.config.embed_scale:.3g}"}
        e, p = trace["token_embeddings"], trace["position_embeddings"]
        if trace.config.position == "concat":
            return {"e_norm": f"{float(np.linalg.norm(e[i])):.2f}", "p_norm": f"{float(np.linalg.norm(p[i])):.2f}",
                    "d_token": trace.config.d_token, "d_position": trace.config.d_position, "pos": i}
        r = readouts.position_addition_readout(e, p, trace["embedding_sum"], i)
        return {**lab_values(), "cos_selected": f"{r.cos_selected:.3f}", "survival": r.survival,
                "cos_ep": f"{r.cos_ep:.2f}", "cos_mean": f"{r.cos_mean:.3f}",
                "e_norm": f"{r.e_norm:.2f}", "p_norm": f"{r.p_norm:.2f}",
                "p_dominates": r.p_dominates, "first_dims_ratio": f"{r.first_dims_ratio:.2f}"}


@lru_cache(maxsize=1)
def _lab_numbers() -> tuple:
    from ...core.analysis.walk_readouts import positions_lab_numbers
    from ...io.walks import walk_extras

    rows = walk_extras().get("positions_results")
    return tuple(positions_lab_numbers(rows).items()) if rows else ()


def lab_values() -> dict:
    """What the positions laboratory measured (its shipped results), for the text's
    concatenation paragraph; "not available" where its results file is missing."""
    numbers = dict(_lab_numbers())
    if not numbers:
        return {"lab_sum": "not available", "lab_concat": "not available", "lab_seeds": 0,
                "lab_versus": "not measured"}
    return {"lab_sum": numbers["sum_accuracy"], "lab_concat": numbers["concat_accuracy"],
            "lab_seeds": numbers["n_seeds"], "lab_versus": numbers["concat_versus_sum"]}
