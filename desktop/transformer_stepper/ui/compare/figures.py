"""The Compare figures that are one plot each: the lookup rows, what enters layer 0 (vectors,
or the rotation for rotary models), the cosines across hidden states, and the attention of
each occurrence. Each is fed a Comparison by `draw(...)`; the map and the nearest words are in
their own modules."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg

from ..plots.bar_item import BarItem
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor

from ...core.analysis.compare import Comparison
from ...core.model import measures
from ..plots import Curve, Heatmap, Lines
from ..plots.lines import beside_legend
from ..plots.common import LABEL_STYLE, PALETTE, finite_max, format_value, nearest_index
from ..plots.figure import Figure

ENTRY_NAMES = {"token_embeddings": "e", "token_embeddings_scaled": "e·scale",
               "position_embeddings": "p", "token_type_embeddings": "t",
               "embedding_output": "x₀"}


MAX_LEGEND_PAIRS = 10
# pairs are drawn in dark tones: the bright palette is the sentences' own, in every plot
PAIR_PALETTE = ("#222222", "#393b79", "#843c39", "#637939", "#7b4173", "#8c6d31", "#5254a3",
                "#ad494a", "#8ca252", "#bd9e39")


def sentence_colour(number: int) -> QColor:
    """The colour of sentence `number` (1-based) everywhere in Compare."""
    return QColor(PALETTE[(number - 1) % len(PALETTE)])


def short_states(names: Sequence[str]) -> list[str]:
    # "embedding", "layer 0", ... -> "emb", "L0", ...: an axis of 13 states stays legible
    return ["emb" if n == "embedding" else "L" + n.split()[-1] for n in names]


def _range_text(values: np.ndarray) -> str:
    low, high = float(np.min(values)), float(np.max(values))
    return f"{low:.3f}" if abs(high - low) < 5e-4 else f"{low:.3f}–{high:.3f}"


class VectorRows(Heatmap):
    """A heatmap of vectors that is re-rendered only when its values change (an edit of one
    sentence leaves the other sentences' rows as they were)."""

    def __init__(self, title: str) -> None:
        super().__init__(title, "dimension", "", value_label="value", row_names="row",
                         col_names="dim", click=None)
        self._shown: Optional[tuple] = None

    def _unchanged(self, values: np.ndarray, labels: list[str]) -> bool:
        shown = self._shown
        self._shown = (values, labels)
        return (shown is not None and shown[1] == labels and shown[0].shape == values.shape
                and np.array_equal(shown[0], values))


# -- 1. the lookup row ------------------------------------------------------------------------------
class LookupFigure(VectorRows):
    """Each occurrence's row of E, then each row minus the first: exactly 0 for the same id."""

    def __init__(self) -> None:
        super().__init__("Lookup rows of E")

    def draw(self, comparison: Comparison) -> None:
        occurrences = comparison.occurrences
        if not occurrences:
            return
        rows = list(comparison.lookup_rows)
        labels = [f"{o.label} #{o.token_id}" for o in occurrences]
        first = occurrences[0]
        for i, occ in enumerate(occurrences[1:], start=1):
            rows.append(comparison.lookup_difference(i, 0))
            labels.append(f"S{occ.number} − S{first.number}")
        values = np.stack(rows).astype(np.float32)
        limit = measures.robust_limit(comparison.lookup_rows)
        ids = {o.token_id for o in occurrences}
        if len(ids) == 1:
            self.set_title(f"Rows of E: id {first.token_id} in every sentence, difference 0")
        else:
            listed = ", ".join(str(o.token_id) for o in occurrences)
            self.set_title(f"Rows of E: the pieces differ (ids {listed})")
        n_occ = len(occurrences)

        def describe(row: int, col: int) -> str:
            value = format_value(float(values[row, col]))
            if row < n_occ:
                occ = occurrences[row]
                return f"E[{occ.token_id}] ('{occ.piece}', sentence {occ.number}), dim {col}: {value}"
            occ = occurrences[row - n_occ + 1]
            same = "same id: exactly 0" if occ.token_id == first.token_id else "different ids"
            return (f"E[{occ.token_id}] − E[{first.token_id}], dim {col}: {value} ({same}; max |Δ| "
                    f"{format_value(float(np.abs(values[row]).max()))})")

        if self._unchanged(values, labels):
            self.describe = describe
            return
        self.set_data(values, labels, None, levels=(-limit, limit), describe=describe)


# -- 2. what enters layer 0 -------------------------------------------------------------------------
def _in_x0_columns(row: np.ndarray, name: str, config) -> np.ndarray:
    """A concat model's e and p are narrower than x₀ = [e | p]: each drawn in its own columns
    of x₀ (NaN, drawn blank, in the other block's); any other row as it is."""
    if row.shape[-1] == config.d_model:
        return row
    placed = np.full(config.d_model, np.nan, dtype=np.float32)
    start = config.d_model - config.d_position if name == "position_embeddings" else 0
    placed[start:start + row.shape[-1]] = row
    return placed



class EntryFigure(VectorRows):
    """e, p, t and the embedding output x₀ of each occurrence, one row each."""

    def __init__(self) -> None:
        super().__init__("What enters layer 0")
        self.colorbar.axis.setLabel("value / row's max |value|", **LABEL_STYLE)

    def draw(self, comparison: Comparison) -> None:
        entry, occurrences = comparison.entry, comparison.occurrences
        names = [n for n in ENTRY_NAMES if n in entry]
        if not occurrences or not names:
            return
        if "token_embeddings_scaled" in names:          # e·scale is what is added
            names.remove("token_embeddings")
        config = comparison.sentences[occurrences[0].sentence].trace.config
        rows, labels, sources = [], [], []
        for o, occ in enumerate(occurrences):
            for name in names:
                rows.append(_in_x0_columns(entry[name][o], name, config))
                labels.append(f"S{occ.number} {ENTRY_NAMES[name]}")
                sources.append((occ, name))
        exact = np.stack(rows).astype(np.float32)
        # each row in units of its own largest |value|: BERT's x₀ (after LayerNorm) is 20x the
        # size of e, p and t, which one colour scale would wash out; the hover has the values
        # (NaN where a concat row has no such column, or where corrupt weights made one)
        scale = np.array([[max(finite_max(np.abs(row), 0.0), 1e-30)] for row in exact], dtype=np.float32)
        values = exact / scale
        parts = " + ".join(ENTRY_NAMES[n] for n in names if n != "embedding_output")
        made = ("x₀ = [e | p] (side by side)" if config.position == "concat" else
                f"x₀ = LayerNorm({parts})" if config.embed_norm else f"x₀ = {parts}")
        if len(occurrences) > 1:
            self.set_title(f"Into layer 0: {made}, cos {_range_text(comparison.pair_cosines[:, 0])}")
        else:
            self.set_title(f"Into layer 0: {made}")

        def describe(row: int, col: int) -> str:
            occ, name = sources[row]
            return (f"{ENTRY_NAMES[name]} ({name}) of '{occ.piece}' at position {occ.position} of "
                    f"sentence {occ.number}, dim {col}: {format_value(float(exact[row, col]))} "
                    f"(row's largest |value| {format_value(float(scale[row, 0]))})")

        if self._unchanged(values, labels):
            self.describe = describe
            return
        self.set_data(values, labels, None, levels=(-1.0, 1.0), describe=describe)


class RotationFigure(Lines):
    """Rotary models add nothing to x₀: the position turns q and k, pair i by pos·θᵢ."""

    def __init__(self) -> None:
        super().__init__("What enters layer 0: the rotation of q and k", "frequency pair i",
                         "angle pos·θᵢ (radians)", legend=True)
        self.plot.setLogMode(y=True)

    def draw(self, comparison: Comparison) -> None:
        angles = comparison.entry.get("rope_angles")
        occurrences = comparison.occurrences
        if angles is None or not occurrences:
            return
        curves = []
        for o, occ in enumerate(occurrences):
            y = np.asarray(angles[o], dtype=np.float64)
            y = np.where(y > 0, y, np.nan)               # position 0 is not rotated (log axis)
            curves.append(Curve(f"S{occ.number} pos {occ.position}", y,
                                color=sentence_colour(occ.number), width=2))
        self.set_curves(curves)
        same = float(comparison.pair_cosines[:, 0].min()) if len(comparison.pairs) else 1.0
        self.set_title(f"Into layer 0: x₀ = e (cos {same:.6f}); q, k rotate by pos·θᵢ")


# -- 3. cosine across hidden states -------------------------------------------------------------------
class CosineFigure(Lines):
    """Every pair's cosine per hidden-state index (solid), each occurrence's cosine to its
    own state 0 (dashed, in its sentence's colour). The legend stands beside the plot: the
    curves fill every corner of it. Curves whose values did not change are not re-fed (an
    edit of one sentence changes 7 of 28 pairs)."""

    def __init__(self) -> None:
        super().__init__("Cosine per layer", "hidden state", "cosine", legend=False)
        # beside the plot, two short entries a row: in one column ten entries were taller
        # than the plot, and inside it they hid ~40 % of the curves
        self.side_legend = beside_legend(self, columns=2, text_size="8pt")
        self._legend_names: tuple = ()
        self._fed: list[tuple] = []              # per item: (y, colour, dashed) last given
        self.layer_line = pg.InfiniteLine(angle=90, pen=pg.mkPen("#888", width=1,
                                                                 style=Qt.PenStyle.DotLine))
        self.plot.addItem(self.layer_line)

    def draw(self, comparison: Comparison, layer: int) -> None:
        curves: list[Curve] = []
        for p in range(len(comparison.pairs)):
            curves.append(Curve(comparison.pair_label(p), comparison.pair_cosines[p],
                                color=PAIR_PALETTE[p % len(PAIR_PALETTE)], width=2.4))
        n_pairs = len(curves)
        for o, occ in enumerate(comparison.occurrences):
            curves.append(Curve(f"S{occ.number} vs own emb", comparison.self_cosines[o],
                                color=sentence_colour(occ.number), width=1.3))
        self.curves = curves
        self.x_labels = short_states(comparison.state_names)
        for i, curve in enumerate(curves):
            item = self._item(i)
            dashed = i >= n_pairs
            fed = (curve.y, QColor(curve.color).name(), dashed)
            before = self._fed[i] if i < len(self._fed) else None
            if before is not None and before[1:] == fed[1:] and np.array_equal(before[0], curve.y):
                continue
            style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
            item.setData(np.arange(len(curve.y)), curve.y,
                         pen=pg.mkPen(curve.color, width=curve.width, style=style))
            item.setVisible(True)
            if i < len(self._fed):
                self._fed[i] = fed
            else:
                self._fed.append(fed)
        for i in range(len(curves), len(self.items)):
            if i < len(self._fed) and self._fed[i] is not None:
                self.items[i].setData([], [])
                self.items[i].setVisible(False)
                self._fed[i] = None
        # 28 pairs: the hover names them; the legend is rebuilt only when its names change
        shown = [i for i in range(len(curves)) if i < MAX_LEGEND_PAIRS or i >= n_pairs]
        names = tuple(curves[i].name for i in shown)
        if names != self._legend_names:
            self._legend_names = names
            self.side_legend.clear()
            for i in shown:
                # "S1 own" for "S1 vs own emb" (the title and the hover say it in full)
                self.side_legend.addItem(self.items[i], curves[i].name.replace(" vs own emb", " own"))
        self.x_axis.set_labels(self.x_labels)
        low = min([0.0] + [-finite_max(-np.asarray(c.y, dtype=float), 0.0) for c in curves if len(c.y)])
        self.plot.setRange(xRange=(-0.3, len(self.x_labels) - 0.7), yRange=(low, 1.0), padding=0.02)
        self.layer_line.setValue(layer + 1)
        if comparison.pairs:
            self.set_title(f"Cosine per layer: {_range_text(comparison.pair_cosines[:, 0])} → "
                           f"{_range_text(comparison.pair_cosines[:, -1])}")
        else:
            self.set_title("Cosine per layer (dashed: vs its own embedding)")



# -- 6. where the difference comes from: attention ----------------------------------------------------
GAP = 1                        # empty slots between two sentences' bars
READ_LABELS = 3                # the words each occurrence read most are named above their bars
HEADROOM = 1.45                # the weight axis runs to this × the top bar: room for its word


def _group_brush(number: int) -> QBrush:
    colour = QColor(sentence_colour(number))
    colour.setAlpha(170)
    return QBrush(colour)


GROUP_BRUSHES = [_group_brush(n) for n in range(1, len(PALETTE) + 1)]


class AttentionFigure(Figure):
    """Each occurrence's attention row at one layer and head, the sentences side by side: the
    bars are the words it read, its own token outlined."""

    def __init__(self) -> None:
        super().__init__("Attention of each occurrence", "token (sentences side by side)", "weight")
        self.groups: list[pg.BarGraphItem] = []              # one per sentence
        self.own = BarItem(x=[], height=[], width=0.8, pen=pg.mkPen("#111", width=1.6))
        self.own.setZValue(2)                                # the compared token, outlined
        self.plot.addItem(self.own)
        self.slots: list[Optional[tuple[int, int]]] = []    # bar slot -> (occurrence, token)
        self.weights: list[np.ndarray] = []
        self.pieces: list[Sequence[str]] = []
        self.comparison: Optional[Comparison] = None
        self.separators: list[pg.InfiniteLine] = []
        self.tags: list[pg.TextItem] = []
        self.read_labels: list[pg.TextItem] = []
        self.n_read = 0                                      # of them in use, heaviest first
        self.where = ""
        self.plot.vb.sigRangeChanged.connect(self._lift_tags)   # tags stay at the top
        self.plot.vb.sigTransformChanged.connect(self._declutter)      # resized or re-ranged

    def draw(self, comparison: Comparison, attention: Sequence[np.ndarray], layer: int,
             head: int, labels: Sequence[Sequence[str]]) -> None:
        """`attention[o]` [n_head, n_seq] for occurrence o; `labels[o]` its sentence's token
        labels."""
        self.comparison = comparison
        self.where = f"layer {layer}, head {head}"
        self.weights = [np.asarray(a[head]) for a in attention]
        self.pieces = [list(labels[o]) for o in range(len(attention))]
        axis_labels: list[str] = []
        self.slots = []
        starts = []
        groups = self._items(self.groups, len(self.weights),
                             lambda: BarItem(x=[], height=[], width=0.8, pen=None))
        own_x, own_height, own_brushes = [], [], []
        for o, (occ, weights, group) in enumerate(zip(comparison.occurrences, self.weights, groups)):
            if o:
                self.slots.extend([None] * GAP)
                axis_labels.extend([""] * GAP)
            start = len(self.slots)
            starts.append(start)
            # one bar item per sentence, of one colour: per-bar brushes cost more than the bars
            brush = GROUP_BRUSHES[(occ.number - 1) % len(GROUP_BRUSHES)]
            group.setOpts(x=np.arange(start, start + len(weights), dtype=float),
                          height=np.nan_to_num(np.asarray(weights, dtype=float), nan=0.0, posinf=0.0,
                                               neginf=0.0), brush=brush)
            group.setVisible(True)
            own_x.append(start + occ.position)
            own_height.append(float(np.nan_to_num(weights[occ.position], nan=0.0, posinf=0.0, neginf=0.0)))
            own_brushes.append(sentence_colour(occ.number))
            self.slots.extend((o, j) for j in range(len(weights)))
            axis_labels.extend(self.pieces[o][:len(weights)])
        self.own.setOpts(x=np.asarray(own_x, dtype=float), height=np.asarray(own_height),
                         brushes=own_brushes)
        self.x_axis.set_labels(axis_labels)
        self.x_axis.set_emphasis([s + occ.position for s, occ in zip(starts, comparison.occurrences)])
        self._place_tags(starts, comparison)
        self._label_read(starts)
        top = max((finite_max(w, 0.0) for w in self.weights if len(w)), default=1.0)
        self.plot.setRange(xRange=(-0.6, max(len(self.slots), 1) - 0.4), yRange=(0, top * HEADROOM or 1),
                           padding=0)
        self.set_title(f"What each one read: {self.where}")
        self._declutter()

    def _items(self, pool: list, needed: int, make) -> list:
        # text items and lines are kept and re-placed: making them costs more than the bars
        while len(pool) < needed:
            item = make()
            self.plot.addItem(item)
            pool.append(item)
        for item in pool[needed:]:
            item.setVisible(False)
        return pool[:needed]

    def _place_tags(self, starts: list[int], comparison: Comparison) -> None:
        lines = self._items(self.separators, max(len(starts) - 1, 0),
                            lambda: pg.InfiniteLine(angle=90, pen=pg.mkPen("#bbb")))
        for line, start in zip(lines, starts[1:]):
            line.setValue(start - (GAP + 1) / 2)
            line.setVisible(True)
        tags = self._items(self.tags, len(starts), lambda: pg.TextItem(anchor=(0, 0)))
        for tag, start, occ in zip(tags, starts, comparison.occurrences):
            if tag.toPlainText() != f"S{occ.number}":
                tag.setText(f"S{occ.number}", color=sentence_colour(occ.number))
            tag.setPos(start - 0.4, tag.pos().y())
            tag.setVisible(True)
        self._lift_tags()

    def _label_read(self, starts: list[int]) -> None:
        """Name the words each occurrence read most above their bars (the axis thins its
        labels when the sentences are long)."""
        placed = []
        for o, (start, weights) in enumerate(zip(starts, self.weights)):
            for j in np.argsort(-weights, kind="stable")[:READ_LABELS]:
                if weights[j] < 0.1:
                    break
                placed.append((self.pieces[o][j], start + int(j), float(weights[j])))
        placed.sort(key=lambda p: -p[2])          # the heaviest first: they win a crowded spot
        labels = self._items(self.read_labels, len(placed),
                             lambda: pg.TextItem(color="#333", anchor=(0.5, 1.0)))
        self.n_read = len(placed)
        for label, (text, x, y) in zip(labels, placed):
            if label.toPlainText() != text:
                label.setText(text, color="#333")
            label.setPos(x, y)
            label.setVisible(True)

    def _lift_tags(self, *_) -> None:
        top = self.plot.vb.viewRange()[1][1]
        for tag in self.tags:
            tag.setPos(tag.pos().x(), top)
        self._declutter()

    def _declutter(self, *_) -> None:
        """Show a word above its bar only where it overlaps no heavier word and no sentence tag
        (issue 24: 'boat' over 'to', 'S4' over 'from'); the rest are named on hover."""
        taken = [self.text_rect(tag) for tag in self.tags if tag.isVisible()]
        for label in self.read_labels[:self.n_read]:
            rect = self.text_rect(label)
            free = not any(rect.intersects(other) for other in taken)
            label.setVisible(free)
            if free:
                taken.append(rect)

    def text_rect(self, item: pg.TextItem) -> QRectF:
        """Where a text item is drawn, in scene pixels (from its anchor, whether or not its own
        transform has caught up with the view's yet)."""
        at = self.plot.vb.mapViewToScene(item.pos())
        size = item.textItem.boundingRect()
        return QRectF(at.x() - item.anchor.x() * size.width(), at.y() - item.anchor.y() * size.height(),
                      size.width(), size.height())

    def shown_read_labels(self) -> list[pg.TextItem]:
        return [label for label in self.read_labels[:self.n_read] if label.isVisible()]

    def _slot(self, x: float) -> Optional[tuple[int, int]]:
        i = nearest_index(x, len(self.slots))
        return self.slots[i] if i is not None else None

    def hover_at(self, x: float, y: float) -> Optional[str]:
        slot = self._slot(x)
        if slot is None or self.comparison is None:
            return None
        o, j = slot
        occ = self.comparison.occurrences[o]
        return (f"S{occ.number} '{occ.piece}' (token {occ.position}) reads token {j} "
                f"'{self.pieces[o][j]}' with weight {format_value(float(self.weights[o][j]))} "
                f"({self.where})")
