"""The axis of a figure: names integer positions (tokens, characters, layers), thins or turns
its labels to what fits at the current zoom, and spaces numeric ticks so their labels never run
together."""
from __future__ import annotations

import math
from typing import Optional, Sequence

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFont, QFontMetrics, QFontMetricsF

from .common import MIN_TICK_PIXELS, ROTATED_PIXELS, SHORT_CHART, TICK_FONT_POINTS, cache_on_screen

TICK_GAP = 8.0               # px kept free between two tick labels


def _next_nice(spacing: float) -> float:
    """The next tick spacing up in the 1, 2, 5 × 10^k series."""
    power = 10.0 ** math.floor(math.log10(spacing) + 1e-9)
    for step in (2.0, 5.0, 10.0):
        if step * power > spacing * (1 + 1e-9):
            return step * power
    return 10.0 * power


def legible_tick_spacing(axis: pg.AxisItem, minVal: float, maxVal: float, size: float):
    """pyqtgraph's tick levels, widened until the labels fit between their ticks with
    TICK_GAP to spare: pyqtgraph always writes its first level, at least two intervals, however
    short the axis ("0.20.40.60.8" in a narrow plot). A level is kept only when each of its
    labels (as written: width across, line height up a vertical axis) fits its spacing."""
    levels = pg.AxisItem.tickSpacing(axis, minVal, maxVal, size)
    span = abs(maxVal - minVal)
    if not levels or span == 0 or size <= 0:
        return levels
    pixels_per_unit = size / span
    metrics = QFontMetricsF(axis.style["tickFont"] or QFont())
    across = axis.orientation in ("bottom", "top")
    low = min(minVal, maxVal)

    def fits(spacing: float) -> bool:
        if not across:
            return spacing * pixels_per_unit >= metrics.height() + TICK_GAP
        first = math.ceil(low / spacing) * spacing
        values = [first + k * spacing for k in range(int(span / spacing) + 1)][:64]
        strings = axis.tickStrings(values, axis.autoSIPrefixScale, spacing) if values else []
        widest = max((metrics.horizontalAdvance(text) for text in strings), default=0.0)
        return spacing * pixels_per_unit >= widest + TICK_GAP

    major = levels[0][0]
    while not fits(major) and major < 2 * span:
        major = _next_nice(major)
    kept = [(major, 0)]
    for spacing, offset in levels[1:]:
        # a finer level: only one whose labels fit too (and which divides the major one)
        ratio = major / spacing
        if spacing < major and abs(ratio - round(ratio)) < 1e-6 and fits(spacing):
            kept.append((spacing, offset))
    return kept


class LabelAxis(pg.AxisItem):
    """An axis that names integer positions (tokens, characters, layers) and thins its labels to
    what fits at the current zoom; without labels it behaves like a normal numeric axis."""

    def __init__(self, orientation: str, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.labels: Optional[Sequence[str]] = None
        self.emphasis: list[int] = []       # always labelled: the selected token, the largest bar
        font = QFont()
        font.setPointSize(TICK_FONT_POINTS)
        self.setTickFont(font)
        self.enableAutoSIPrefix(False)      # "value (x0.001)" confuses more than it helps
        cache_on_screen(self)
        self._label_pixels = 14.0
        self._texts: dict[int, str] = {}    # tick -> its label as drawn (cut to its room)
        self.rotated = False                # labels written upwards (too many to write across)
        self._shrink = 1.0                  # their font's scale (< 1: a short chart's narrow bars)

    def set_labels(self, labels: Optional[Sequence[str]]) -> None:
        self.labels = list(labels) if labels is not None else None
        metrics = QFontMetrics(self.style["tickFont"] or QFont())
        if self.labels and self.orientation in ("bottom", "top"):
            sample = self.labels[:: max(1, len(self.labels) // 500)]
            self._label_pixels = max(metrics.horizontalAdvance(_shorten(s)) for s in sample) + 10.0
        else:
            self._label_pixels = metrics.height() + 2.0
        self.picture = None
        self.update()

    def set_emphasis(self, indices: Sequence[Optional[int]]) -> None:
        """Labels to show whatever the thinning, most important first."""
        emphasis = list(dict.fromkeys(int(i) for i in indices if i is not None))
        if emphasis != self.emphasis:
            self.emphasis = emphasis
            self.picture = None
            self.update()

    def tickSpacing(self, minVal, maxVal, size):
        if self._tickSpacing is not None:       # (set by hand: as asked)
            return self._tickSpacing
        return legible_tick_spacing(self, minVal, maxVal, size)

    def tickValues(self, minVal, maxVal, size):
        if not self.labels:
            return super().tickValues(minVal, maxVal, size)
        lo = max(0, math.ceil(min(minVal, maxVal) - 1e-6))
        hi = min(len(self.labels) - 1, math.floor(max(minVal, maxVal) + 1e-6))
        if hi < lo or size <= 0:
            return []
        self._texts = {}
        rotated = False
        if self.orientation == "bottom":
            pixels_per_unit = size / abs(maxVal - minVal or 1)
            placed = self._fit_across(lo, hi, min(minVal, maxVal), pixels_per_unit)
            # complete: every label under its tick, none cut ("pri…" across is worse than
            # "princess" written upwards; an export laid out narrower than the screen cut them)
            complete = (placed is not None and len(placed) == hi - lo + 1
                        and all(placed[i] == _shorten(self.labels[i]) for i in placed))
            line = QFontMetricsF(self._font()).height()
            short = len(self.labels) <= SHORT_CHART and pixels_per_unit >= MIN_TICK_PIXELS
            if not complete and (pixels_per_unit >= line or short):
                # too narrow to write across, wide enough to write upwards: every label, turned
                # (a short chart's in a smaller font when its bars are narrower than a line)
                self._shrink = min(1.0, pixels_per_unit / line)
                placed, rotated = {i: self._upright(i) for i in range(lo, hi + 1)}, True
            if placed is not None:
                self._set_rotated(rotated)
                self._texts = placed
                return [(1, sorted(placed))]
            self._set_rotated(False)
        step = max(1, math.ceil((hi - lo + 1) * self._label_pixels / size))
        first = lo + (-lo) % step
        chosen: list[int] = []
        for i in self.emphasis:            # a later one may not crowd an earlier one
            if lo <= i <= hi and all(abs(i - c) >= step for c in chosen):
                chosen.append(i)
        # every step-th label, but never one that would overlap an emphasised label
        regular = [v for v in range(first, hi + 1, step) if all(abs(v - c) >= step for c in chosen)]
        return [(step, sorted(chosen + regular))]

    def _font(self) -> QFont:
        return self.style["tickFont"] or QFont()

    def _upright_font(self) -> QFont:
        """The font of labels written upwards: the tick font, shrunk to the room per label."""
        font = QFont(self._font())
        if self._shrink < 1.0:
            font.setPointSizeF(max(1.0, font.pointSizeF() * self._shrink))
        return font

    def _upright(self, i: int) -> str:
        """Label i, written upwards: cut to ROTATED_PIXELS, but an emphasised one whole."""
        if i in self.emphasis:
            return _shorten(self.labels[i])
        return QFontMetricsF(self._upright_font()).elidedText(_shorten(self.labels[i]),
                                                              Qt.TextElideMode.ElideRight, ROTATED_PIXELS)

    def _set_rotated(self, rotated: bool) -> None:
        if rotated != self.rotated:
            self.rotated = rotated
            self.picture = None
            if not rotated:
                self.textHeight = 0          # measured afresh by the next drawing
                self._updateHeight()

    def _apart(self, levels):
        """Ticks set by hand (setTicks: a log scale's 0.7, 0.8, 0.9, 1 …) thinned to those whose
        labels keep TICK_GAP apart at the axis's present length, the shortest labels first."""
        low, high = self.range
        across = self.orientation in ("bottom", "top")
        length = self.geometry().width() if across else self.geometry().height()
        if not length or high == low:
            return levels
        pixels_per_unit = length / abs(high - low)
        metrics = QFontMetricsF(self._font())
        placed: list[tuple[float, float]] = []       # (position, half its extent)
        thinned = []
        for level in levels:
            kept = []
            for value, text in sorted(level, key=lambda tick: len(str(tick[1]))):
                half = (metrics.horizontalAdvance(str(text)) if across else metrics.height()) / 2
                where = float(value) * pixels_per_unit
                if all(abs(where - other) >= half + other_half + TICK_GAP for other, other_half in placed):
                    placed.append((where, half))
                    kept.append((value, text))
            thinned.append(sorted(kept))
        return thinned

    def generateDrawSpecs(self, p):
        given = self._tickLevels
        if given is not None:
            self._tickLevels = self._apart(given)
        try:
            specs = super().generateDrawSpecs(p)
        finally:
            self._tickLevels = given
        if specs is None or not self.rotated:
            return specs
        # turned labels: one under every tick (pyqtgraph's own placement drops any that would
        # overhang the axis when written across), and room below the axis for the longest
        axis_spec, tick_specs, _ = specs
        bounds = self.mapRectFromParent(self.geometry())
        low, high = self.range
        scale = bounds.width() / ((high - low) or 1.0)
        metrics = QFontMetricsF(self._upright_font())
        top = bounds.top() + max(0, self.style["tickLength"]) + self.style["tickTextOffset"][1]
        text_specs, longest = [], 0.0
        for i, text in sorted(self._texts.items()):
            x = bounds.left() + (i - low) * scale
            width = metrics.horizontalAdvance(text)
            longest = max(longest, width)
            text_specs.append((QRectF(x - metrics.height() / 2, top, metrics.height(), width),
                               Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, text))
        self._updateMaxTextSize(int(math.ceil(longest)))
        return axis_spec, tick_specs, text_specs

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):
        if not self.rotated:
            return super().drawPicture(p, axisSpec, tickSpecs, textSpecs)
        super().drawPicture(p, axisSpec, tickSpecs, [])
        p.setFont(self._upright_font())
        p.setPen(self.textPen())
        for rect, flags, text in textSpecs:
            p.save()
            p.translate(rect.center().x(), rect.top())
            p.rotate(-90)             # read upwards, ending at the tick
            p.drawText(QRectF(-rect.height(), -rect.width() / 2, rect.height(), rect.width()), flags, text)
            p.restore()

    def _fit_across(self, lo: int, hi: int, start: float, pixels_per_unit: float) -> Optional[dict]:
        """Every label from lo to hi under its tick, each cut to the room between its
        neighbours (and inside the axis at the ends); an emphasised one whole, its crowded
        neighbours left out. None when the room is too small to read (then labels are thinned)."""
        metrics = QFontMetricsF(self.style["tickFont"] or QFont())
        gap = 6.0
        room = pixels_per_unit - gap
        if room < metrics.horizontalAdvance("abc…"):
            return None
        length = self.geometry().width() or (hi - lo + 1) * pixels_per_unit

        def centre(i: int) -> float:
            return (i - start) * pixels_per_unit

        def fitted(i: int, width: float) -> str:
            text = _shorten(self.labels[i])
            return metrics.elidedText(text, Qt.TextElideMode.ElideRight, max(width, 0.0))

        texts: dict[int, str] = {}
        spans: list[tuple[float, float]] = []
        for i in self.emphasis:            # whole (as far as the axis allows), most important first
            if lo <= i <= hi:
                edge = 2 * min(centre(i), length - centre(i))
                text = fitted(i, edge)
                half = metrics.horizontalAdvance(text) / 2 + gap / 2
                if text and all(b <= centre(i) - half or a >= centre(i) + half for a, b in spans):
                    texts[i] = text
                    spans.append((centre(i) - half, centre(i) + half))
        for i in range(lo, hi + 1):
            if i in texts:
                continue
            # the room between its neighbours, the axis's ends and any whole (emphasised) label
            c = centre(i)
            left = max([b for a, b in spans if b <= c] + [c - pixels_per_unit / 2, 0.0])
            right = min([a for a, b in spans if a >= c] + [c + pixels_per_unit / 2, length])
            if any(a < c < b for a, b in spans):
                continue
            text = fitted(i, min(room, 2 * min(c - left, right - c) - gap))
            if len(text) >= 2 or (text and text == self.labels[i]):
                texts[i] = text
        return texts

    def tickStrings(self, values, scale, spacing):
        if not self.labels:
            return super().tickStrings(values, scale, spacing)
        out = []
        texts = getattr(self, "_texts", {})
        for v in values:
            i = int(round(v))
            if i in texts:
                out.append(texts[i])
                continue
            label = self.labels[i] if 0 <= i < len(self.labels) else ""
            out.append(_shorten(label))
        return out


def _shorten(label: str, limit: int = 16) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
