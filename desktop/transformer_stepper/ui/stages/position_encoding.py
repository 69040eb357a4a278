"""3. Position encoding: the position table (fixed sinusoids or learned rows), BERT's
token-type rows."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyqtgraph as pg

from ...core.model import measures
from ...core.model import ops
from ...core.model.rotary import rope_frequencies
from ..plots import Curve, Heatmap, Lines
from ..plots.common import HIGHLIGHT_PEN
from .base import StageView

MIN_POSITIONS = 64      # curves and similarity span at least this many positions (if the model has them)


def position_rows(view: StageView, n_positions: int) -> np.ndarray:
    config = view.trace.config
    if config.position in ("sinusoidal", "concat"):          # concat: its own d_position dims
        return ops.sinusoid_table(n_positions, position_width(config))
    return np.array(view.session.model.params["wpe"][:n_positions])   # a copy, not a view of the file


def position_width(config) -> int:
    """The width of p: d_model where p is added, d_position where it is concatenated."""
    return config.d_position if config.position == "concat" else config.d_model


def shown_dimensions(d_model: int) -> list[int]:
    """A handful of dimensions from fast to slow (sinusoids: sin/cos pairs)."""
    picks = [0, 1, 2, 3, d_model // 8, d_model // 4, d_model // 2, d_model - 2]
    return sorted({min(max(p, 0), d_model - 1) for p in picks})


class PositionEncodingView(StageView):
    stage_key = "position_encoding"

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self.table = self.add_figure("position_table", Heatmap(
            "Position vectors p for this text's positions", "dimension", "position",
            value_label="value", row_names="position", col_names="dim"), 0, 0)
        yield
        self.curves = self.add_figure("position_curves", Lines(
            "A few dimensions of p across positions", "position", "value"), 0, 1)
        yield
        self.similarity = self.add_figure("position_similarity", Heatmap(
            "Cosine similarity between position vectors", "position", "position",
            value_label="cosine", row_names="position", col_names="position"), 1, 0)
        yield
        self.wavelengths = self.add_figure("wavelengths", Lines(
            "Wavelength of each dimension's sinusoid", "dimension", "wavelength (positions, log10)",
            legend=False), 1, 1)
        yield
        self.token_types = self.add_figure("token_type_rows", Heatmap(
            "Token-type (segment) rows", "dimension", "token type", value_label="value",
            row_names="type", col_names="dim", click=None), 1, 1)
        yield
        self.relative = self.add_figure("relative_position_scores", Lines(
            "RoPE scores depend only on relative position", "shift (positions)", "score"), 1, 0)
        self.relative.unused = True
        self.position_line = pg.InfiniteLine(angle=90, pen=HIGHLIGHT_PEN)
        self.curves.plot.addItem(self.position_line)

    def required_layers(self) -> list[int]:
        # rotary models: the rotation is shown on layer 0's own q and k
        return [0] if self.trace.config.position == "rotary" else []

    def update_data(self) -> None:
        if self.trace.config.position == "rotary":
            self._update_rotary()
            return
        self.relative.unused = True
        self.similarity.unused = False
        self.table.set_axis_labels("dimension")
        self.wavelengths.set_axis_labels("dimension")
        self.curves.set_title("A few dimensions of p across positions")
        self.wavelengths.set_title("Wavelength of each dimension's sinusoid")
        trace = self.trace
        config = trace.config
        n_positions = min(config.n_ctx, max(trace.n_seq, MIN_POSITIONS))
        table = position_rows(self, n_positions)
        positions = [str(i) for i in range(trace.n_seq)]
        sinusoidal = config.position in ("sinusoidal", "concat")
        width = position_width(config)
        kind = ("sinusoids" if config.position == "sinusoidal" else
                f"sinusoids {width} wide, beside e" if sinusoidal else "learned rows")
        self.table.set_title(f"Position vectors p for this text's {trace.n_seq} positions ({kind})")
        self.table.set_data(trace["position_embeddings"], positions)
        self.curves.set_curves([Curve(f"dim {d}", table[:, d]) for d in shown_dimensions(width)])
        self.similarity.set_title(f"Cosine similarity between position vectors 0–{n_positions - 1}")
        self.similarity.set_data(measures.cosine_matrix(table), [str(i) for i in range(n_positions)],
                                 [str(i) for i in range(n_positions)], levels=(-1.0, 1.0))
        self.wavelengths.unused = not sinusoidal
        if sinusoidal:
            pairs = np.arange(width) // 2 * 2
            wavelength = 2 * np.pi * 10000.0 ** (pairs / width)
            self.wavelengths.set_curves([Curve("wavelength", np.log10(wavelength).astype(np.float32))])
        self.token_types.unused = sinusoidal or not config.n_token_types
        if not self.token_types.unused:
            types = np.array(self.session.model.params["wtt"])   # a copy, not a view of the file
            self.token_types.set_data(types, [f"type {t}" for t in range(len(types))])

    # -- rotary models: no position vector; q and k are turned by pos · θ_i ---------------------
    def _update_rotary(self) -> None:
        trace = self.trace
        config = trace.config
        angles = trace["rope_angles"]                                   # [n_seq, d_head/2]
        positions = [str(i) for i in range(trace.n_seq)]
        partial = (f" (the first {config.d_rotary} of {config.d_head} dims of a head; the other "
                   f"{config.d_head - config.d_rotary} are not rotated)" if config.d_rotary < config.d_head else "")
        self.table.set_title(f"Rotation angle pos·θ_i of each of {angles.shape[1]} pairs{partial}, "
                             f"wrapped to (−π, π] (radians)")
        self.table.set_axis_labels("pair i")
        self.wavelengths.set_axis_labels("pair i")
        self.table.set_data(measures.wrapped(angles), positions, col_labels=[f"pair {i}" for i in range(angles.shape[1])])
        pairs = measures.shown_pairs(angles.shape[1])
        n_positions = max(trace.n_seq, MIN_POSITIONS)
        freqs = rope_frequencies(config, trace.n_seq)
        grid = np.arange(n_positions, dtype=np.float32)[:, None] * freqs[None, :]
        self.curves.set_title("cos(pos·θ_i) of a few pairs, fast to slow")
        self.curves.set_curves([Curve(f"pair {i}", np.cos(grid[:, i])) for i in pairs])
        q, k, i, j = self._shift_pair()
        shifts = np.arange(0, max(64, trace.n_seq))
        together, key_only = measures.rope_shift_scores(config, q, k, i, j, shifts)
        self.shift_curves = (together, key_only)
        self.similarity.unused = True
        self.relative.unused = False
        self.relative.set_title(f"Score of '{self.labels[i]}' (query, pos {i}) and '{self.labels[j]}' "
                                f"(key, pos {j}), layer 0, head {self.session.head}, as positions move")
        self.relative.set_curves([Curve("both moved by the shift: the same score", together),
                                  Curve("only the key moved", key_only)])
        self.wavelengths.unused = False
        self.wavelengths.set_title("Wavelength of each pair (positions per turn, log10)")
        curves = [Curve("this model", np.log10(measures.wavelengths(freqs)))]
        if config.rope_scaling:
            plain = ops.rope_frequencies(config.d_rotary, config.rope_theta)
            curves.append(Curve("before rope scaling", np.log10(measures.wavelengths(plain))))
        self.wavelengths.set_curves(curves)
        self.token_types.unused = True

    def _shift_pair(self):
        """The selected token as query and the token before it (or itself) as key, layer 0,
        the selected head: their unrotated q and k."""
        trace = self.trace
        i = self.selected
        j = max(i - 1, 0)
        head = self.session.head
        return (trace.head_array("q_unrotated", 0, head)[i], trace.head_array("k_unrotated", 0, head)[j], i, j)

    def update_selection(self) -> None:
        i = self.selected
        self.table.set_highlight(row=i)
        self.similarity.set_highlight(row=i)
        self.position_line.setValue(i)

    def stage_flags(self) -> dict:
        trace = self.trace
        n_positions = min(trace.config.n_ctx, max(trace.n_seq, MIN_POSITIONS))
        return {"has_next": self.selected + 1 < n_positions}

    def stage_values(self) -> dict:
        trace, i = self.trace, self.selected
        config = trace.config
        if config.position == "rotary":
            together, key_only = self.shift_curves
            freqs = rope_frequencies(config, trace.n_seq)
            return {"pos": i, "n_pairs": len(freqs), "theta": f"{config.rope_theta:g}",
                    "fastest": f"{float(measures.wavelengths(freqs)[0]):.1f}",
                    "slowest": f"{float(measures.wavelengths(freqs)[-1]):,.0f}",
                    "score_shift": f"{float(together[0]):.4f}",
                    "score_spread": f"{float(np.ptp(together)):.1e}",
                    "key_only_min": f"{float(key_only.min()):.3f}",
                    "key_only_max": f"{float(key_only.max()):.3f}",
                    "scaling": config.rope_scaling or "none"}
        n_positions = min(config.n_ctx, max(trace.n_seq, MIN_POSITIONS))
        width = position_width(config)
        similarity = self.similarity.values
        near = float(similarity[i, min(i + 1, n_positions - 1)])
        far = float(similarity[i, n_positions - 1])
        return {"pos": i, "cos_next": f"{near:.3f}", "cos_far": f"{far:.3f}",
                "far_pos": n_positions - 1,
                "longest_wavelength": f"{2 * np.pi * 10000 ** ((width - 2) / width):,.0f}",
                "d_position": width, "d_token": config.d_model - width if config.position == "concat" else config.d_model}
