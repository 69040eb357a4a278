"""3. Position encoding: the position table (fixed sinusoids or learned rows), BERT's
token-type rows."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from ...core import ops
from .. import analysis
from ..plots import Curve, Heatmap, Lines
from ..plots.common import HIGHLIGHT_PEN
from .base import StageView

MIN_POSITIONS = 64      # curves and similarity span at least this many positions (if the model has them)


def position_rows(view: StageView, n_positions: int) -> np.ndarray:
    config = view.trace.config
    if config.position == "sinusoidal":
        return ops.sinusoid_table(n_positions, config.d_model)
    return np.asarray(view.session.model.params["wpe"][:n_positions])


def shown_dimensions(d_model: int) -> list[int]:
    """A handful of dimensions from fast to slow (sinusoids: sin/cos pairs)."""
    picks = [0, 1, 2, 3, d_model // 8, d_model // 4, d_model // 2, d_model - 2]
    return sorted({min(max(p, 0), d_model - 1) for p in picks})


class PositionEncodingView(StageView):
    stage_key = "position_encoding"

    def build(self) -> None:
        self.table = self.add_figure("position_table", Heatmap(
            "Position vectors p for this text's positions", "dimension", "position",
            value_label="value", row_names="position", col_names="dim"), 0, 0)
        self.curves = self.add_figure("position_curves", Lines(
            "A few dimensions of p across positions", "position", "value"), 0, 1)
        self.similarity = self.add_figure("position_similarity", Heatmap(
            "Cosine similarity between position vectors", "position", "position",
            value_label="cosine", row_names="position", col_names="position"), 1, 0)
        self.wavelengths = self.add_figure("wavelengths", Lines(
            "Wavelength of each dimension's sinusoid", "dimension", "wavelength (positions, log10)",
            legend=False), 1, 1)
        self.token_types = self.add_figure("token_type_rows", Heatmap(
            "Token-type (segment) rows", "dimension", "token type", value_label="value",
            row_names="type", col_names="dim", click=None), 1, 1)
        self.position_line = pg.InfiniteLine(angle=90, pen=HIGHLIGHT_PEN)
        self.curves.plot.addItem(self.position_line)

    def update_data(self) -> None:
        trace = self.trace
        config = trace.config
        n_positions = min(config.n_ctx, max(trace.n_seq, MIN_POSITIONS))
        table = position_rows(self, n_positions)
        positions = [str(i) for i in range(trace.n_seq)]
        kind = "sinusoids" if config.position == "sinusoidal" else "learned rows"
        self.table.set_title(f"Position vectors p for this text's {trace.n_seq} positions ({kind})")
        self.table.set_data(trace["position_embeddings"], positions)
        self.curves.set_curves([Curve(f"dim {d}", table[:, d]) for d in shown_dimensions(config.d_model)])
        self.similarity.set_title(f"Cosine similarity between position vectors 0–{n_positions - 1}")
        self.similarity.set_data(analysis.cosine_matrix(table), [str(i) for i in range(n_positions)],
                                 [str(i) for i in range(n_positions)], levels=(-1.0, 1.0))
        sinusoidal = config.position == "sinusoidal"
        self.wavelengths.unused = not sinusoidal
        if sinusoidal:
            pairs = np.arange(config.d_model) // 2 * 2
            wavelength = 2 * np.pi * 10000.0 ** (pairs / config.d_model)
            self.wavelengths.set_curves([Curve("wavelength", np.log10(wavelength).astype(np.float32))])
        self.token_types.unused = sinusoidal or not config.n_token_types
        if not self.token_types.unused:
            types = self.session.model.params["wtt"]
            self.token_types.set_data(types, [f"type {t}" for t in range(len(types))])

    def update_selection(self) -> None:
        i = self.selected
        self.table.set_highlight(row=i)
        self.similarity.set_highlight(row=i)
        self.position_line.setValue(i)

    def stage_values(self) -> dict:
        trace, i = self.trace, self.selected
        config = trace.config
        n_positions = min(config.n_ctx, max(trace.n_seq, MIN_POSITIONS))
        similarity = self.similarity.values
        near = float(similarity[i, min(i + 1, n_positions - 1)]) if i + 1 < n_positions else float("nan")
        far = float(similarity[i, n_positions - 1])
        return {"pos": i, "cos_next": f"{near:.3f}", "cos_far": f"{far:.3f}",
                "far_pos": n_positions - 1,
                "longest_wavelength": f"{2 * np.pi * 10000 ** ((config.d_model - 2) / config.d_model):,.0f}"}
