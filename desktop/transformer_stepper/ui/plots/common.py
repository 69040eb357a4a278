"""What every figure shares: a token-labelled axis, hover and click mapped to data coordinates,
the colours and fonts. A figure is a GraphicsLayoutWidget whose layout (`figure`) stands on its
own: title, axis labels, colour bar; it is what gets exported."""
from __future__ import annotations

import html
import math
import weakref
from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, QSize, QSizeF, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QCursor, QFont, QFontMetrics, QFontMetricsF
from PySide6.QtWidgets import QGraphicsItem, QToolTip, QWidget

SELECTED = QColor("#ff7f0e")          # the selected token, in every plot
HIGHLIGHT_PEN = pg.mkPen(SELECTED, width=2.5)
INK = QColor("#222222")
MUTED = QColor("#9a9a9a")
# a token outside the model's vocabulary: the strip's fill and edge, and its text wherever shown
UNKNOWN_FILL, UNKNOWN_EDGE, UNKNOWN_INK = "#fde2e1", "#c0392b", "#b00020"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f")
BAR_BRUSH = QColor("#4c78a8")
TITLE_POINTS = 11
TITLE_SIZE = f"{TITLE_POINTS}pt"
LABEL_STYLE = {"font-size": "10pt", "color": "#222"}
TICK_FONT_POINTS = 9
ROTATED_PIXELS = 90          # a label written upwards is cut to this length
SHORT_CHART = 16             # up to this many labels, every one is drawn (smaller if need be)
FIGURE_LEAST = QSize(160, 130)      # a figure's minimum before its chrome is known
VIEW_BOX_LEAST = QSize(150, 110)    # the plotting area a figure keeps, to stay legible
MIN_TICK_PIXELS = 7.0        # the smallest font a label is shrunk to (its line height, pixels)

_configured = False
_brushes: dict[str, QBrush] = {}


def solid_brush(colour) -> QBrush:
    """One shared QBrush per colour. pyqtgraph takes a list of QBrush as it is, but converts
    any other colour into a new brush item by item (512 bars: ~3 ms per recolouring)."""
    colour = QColor(colour)
    key = colour.name(QColor.NameFormat.HexArgb)
    brush = _brushes.get(key)
    if brush is None:
        brush = _brushes[key] = QBrush(colour)
    return brush


def configure_pyqtgraph() -> None:
    """Light background, dark ink (legible on screen, on slides and in papers). Antialiasing
    only where it shows (curves ask for it themselves): heatmap cells are sharp-edged anyway,
    and painting without it keeps stage switches fast."""
    global _configured
    if not _configured:
        pg.setConfigOptions(background="w", foreground=INK, antialias=False,
                            imageAxisOrder="row-major")
        _configured = True


def cache_on_screen(item) -> None:
    """Paint `item` once into a pixmap at screen resolution and blit it on later repaints (a
    stage switch repaints every figure of the view). pyqtgraph exporters announce themselves
    with setExportMode: while they render, the item paints itself afresh, so SVG stays vector
    and PNG gets the export's own resolution."""
    item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
    # a weak reference and the class's method: no reference cycle through the item's __dict__
    # (cycles leave Qt objects to the cyclic collector, which may run at an unsafe moment)
    target = weakref.ref(item)
    paint_for_export = type(item).setExportMode

    def set_export_mode(export, opts=None):
        cached = target()
        if cached is None:
            return None
        cached.setCacheMode(QGraphicsItem.CacheMode.NoCache if export
                            else QGraphicsItem.CacheMode.DeviceCoordinateCache)
        return paint_for_export(cached, export, opts)

    item.setExportMode = set_export_mode


def format_value(value: float) -> str:
    """The exact float32 value, as its shortest round-trip representation."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if np.isneginf(value):
        return "−∞ (masked)"
    return str(np.float32(value))


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


def wrap_lines(text: str, metrics: QFontMetrics, width: int, max_lines: int) -> list[str]:
    """`text` broken at spaces into lines at most `width` pixels wide; past `max_lines`, the
    last line is cut with '…' (as is a single word wider than a line)."""
    lines: list[str] = []
    current = ""
    slack = 4          # elidedText measures a few pixels wider than horizontalAdvance at times
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if current and metrics.horizontalAdvance(candidate) > width - slack:
            lines.append(current)
            current = word
        else:
            current = candidate
    lines.append(current)
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [" ".join(lines[max_lines - 1:])]
    return [metrics.elidedText(line, Qt.TextElideMode.ElideRight, width) for line in lines]


def _shorten(label: str, limit: int = 16) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _tolerate_half_freed(cls, name: str, empty) -> None:
    # When the collector frees a closed figure caught in one of pyqtgraph's own reference
    # cycles, it clears the items' __dict__ before Qt deletes their C++ half, and Qt may still
    # call their overrides while it tears the layout down (sizeHint, boundingRect,
    # resizeEvent): they would raise in the event loop ("LabelItem has no attribute
    # _sizeHint"). ui/collector.py carries out Qt's deferred deletions before collecting,
    # which removes most of it; an item that is half-freed anyway answers "nothing" here.
    method = getattr(cls, name)

    def guarded(self, *args):
        if not self.__dict__:
            return empty()
        return method(self, *args)

    guarded.__name__, guarded.__doc__ = method.__name__, method.__doc__
    setattr(cls, name, guarded)


def _curve_options_for_curves_only(name: str) -> None:
    # PlotItem counts every item that says it implements 'plotData' as a curve (a BarGraphItem,
    # a ScatterPlotItem), and its menu's Plot Options (alpha, FFT, mean, downsampling) and
    # restoreState call PlotDataItem methods on each: setAlpha raised AttributeError on bars.
    # The options apply to the curves that have them; the project's bars are no curves at all
    # (plots/bar_item.py).
    method = getattr(pg.PlotItem, name)

    def guarded(self, *args):
        every = self.curves
        self.curves = [c for c in every if isinstance(c, pg.PlotDataItem)]
        try:
            return method(self, *args)
        finally:
            self.curves = every

    guarded.__name__, guarded.__doc__ = method.__name__, method.__doc__
    setattr(pg.PlotItem, name, guarded)


for _option in ("updateAlpha", "updateSpectrumMode", "updateSubtractMeanMode", "updateDownsampling"):
    _curve_options_for_curves_only(_option)

_tolerate_half_freed(pg.LabelItem, "sizeHint", lambda: QSizeF(0, 0))
_tolerate_half_freed(pg.LabelItem, "resizeEvent", lambda: None)
_tolerate_half_freed(pg.GraphicsWidget, "boundingRect", QRectF)


class TitleLabel(pg.LabelItem):
    """A figure title that never forces the figure wider than its window: too long a title is
    wrapped (at spaces), and only what does not fit on three lines is cut with '…'
    (pyqtgraph's LabelItem makes its text width the minimum width)."""

    MAX_LINES = 3

    def __init__(self, text: str, points: int = TITLE_POINTS, color: str = "#222") -> None:
        self.full_text = text
        self.points = points
        self.lines: list[str] = [text]         # as shown
        super().__init__(text, size=f"{points}pt", color=color)

    def set_full_text(self, text: str) -> None:
        self.full_text = text
        self._elide()

    def _elide(self) -> None:
        font = QFont()
        font.setPointSize(self.points)
        available = max(int(self.width()) - 8, 40)
        self.lines = wrap_lines(self.full_text, QFontMetrics(font), available, self.MAX_LINES)
        shown = "<br>".join(html.escape(line, quote=False) for line in self.lines)
        if shown != self.text:
            self.setText(shown)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event is not None:
            self._elide()

    def updateMin(self) -> None:
        height = self.itemRect().height()
        self.setMinimumWidth(0)
        self.setMinimumHeight(height)
        self._sizeHint = {Qt.SizeHint.MinimumSize: (0, height), Qt.SizeHint.PreferredSize: (0, height),
                          Qt.SizeHint.MaximumSize: (-1, -1), Qt.SizeHint.MinimumDescent: (0, 0)}
        self.updateGeometry()


def finite_max(values, default: float) -> float:
    """The largest finite value, or `default` when there is none (all NaN/Inf: corrupt weights)."""
    values = np.asarray(values)
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else default


def no_points_if_none_finite(x: np.ndarray, y: np.ndarray) -> bool:
    """Is no point drawable? (pyqtgraph's scatter bounds warn on an all-NaN set)."""
    return not (np.isfinite(x) & np.isfinite(y)).any()


def finite_span(span, default=None):
    """(low, high) when both are finite numbers with low < high (equal ones are widened a little),
    else `default`: a range or colour levels made from NaN/Inf values are never applied."""
    if span is None:
        return default
    try:
        low, high = float(span[0]), float(span[1])
    except (TypeError, ValueError, IndexError):
        return span            # a QRectF or the like: not ours to check
    if not (np.isfinite(low) and np.isfinite(high)):
        return default
    if high <= low:
        return (low - 0.5, low + 0.5) if high == low else default
    return (low, high)


def adopt_plot_menus(plot: pg.PlotItem, owner) -> None:
    """A PlotItem makes a parentless QMenu and WidgetGroup (its "Plot Options") that sit in a
    reference cycle with it: once the figure is gone, the cycle collector would destroy those
    Qt objects in whichever thread it happens to run in (a worker's: a deadlock or a crash).
    Parented to the figure, Qt deletes them with it, on the GUI thread."""
    menu = getattr(plot, "ctrlMenu", None)
    if menu is not None:
        menu.setParent(owner, menu.windowFlags())
    group = getattr(plot, "stateGroup", None)
    if group is not None:
        group.setParent(owner)


class LazyMenuViewBox(pg.ViewBox):
    """A ViewBox whose right-click menu (two axis panels of Qt widgets, a few ms per plot) is
    made on the first right-click: a stage shows several plots, and most are never
    right-clicked, so building every menu up front only delays the first view of a stage."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, enableMenu=False, **kwargs)
        self.state["enableMenu"] = True      # enabled; it just does not exist yet

    def setRange(self, rect=None, xRange=None, yRange=None, *args, **kwargs):
        # one policy for non-finite numbers (corrupt weights): a range computed from NaN or Inf
        # values is not applied (pyqtgraph raises on it) and the axis keeps what it shows
        xRange, yRange = finite_span(xRange), finite_span(yRange)
        if rect is None and xRange is None and yRange is None:
            return
        super().setRange(rect, xRange, yRange, *args, **kwargs)

    def wheelEvent(self, ev, axis=None):
        # the wheel scrolls what holds the plot (a stage's column of figures, a dock) and
        # zooms only with Ctrl held: over a column of plots a plain wheel zoomed whichever
        # plot was under the pointer, and the column could not be scrolled from there
        if not ev.modifiers() & Qt.KeyboardModifier.ControlModifier:
            ev.ignore()
            return
        super().wheelEvent(ev, axis)

    def getMenu(self, ev):
        if self.menu is None and self.menuEnabled():
            self._applyMenuEnabled()         # pyqtgraph's own way to make it
        return self.menu

    def getContextMenus(self, event):
        menu = self.getMenu(event)
        return menu.actions() if menu is not None else []


class Figure(pg.GraphicsLayoutWidget):
    """One exportable figure: `figure` (the layout) holds a titled PlotItem, and subclasses add
    items once and feed them data. Hover shows `hover_at(x, y)`; a click on a token emits
    tokenClicked with `token_at(x, y)`. Alt-click or Ctrl-click (or a plain click where a click
    selects nothing) emits cellClicked with `cell_at(x, y)`: the value to explain."""

    tokenClicked = Signal(int)
    cellClicked = Signal(int, int)     # (row, column) of a heatmap, (bar, 0) of bars
    hovered = Signal(str)

    def __init__(self, title: str, x_label: str = "", y_label: str = "",
                 parent: Optional[QWidget] = None) -> None:
        configure_pyqtgraph()
        super().__init__(parent)
        self.x_axis = LabelAxis("bottom")
        self.y_axis = LabelAxis("left")
        self.title_label = TitleLabel(title)
        self.ci.addItem(self.title_label, row=0, col=0, colspan=2)
        self.plot = self.ci.addPlot(row=1, col=0, axisItems={"bottom": self.x_axis, "left": self.y_axis},
                                    viewBox=LazyMenuViewBox())
        adopt_plot_menus(self.plot, self)
        self.plot.hideButtons()
        self.set_title(title)
        self.plot.setLabel("bottom", x_label, **LABEL_STYLE)
        self.plot.setLabel("left", y_label, **LABEL_STYLE)
        self.setMinimumSize(FIGURE_LEAST)
        self._legible_pending = False
        # the chrome grows with new data too (longer tick labels, a wrapped title): the view box
        # then shrinks inside an unchanged figure, and the minimum is checked again
        self.plot.vb.sigResized.connect(self._check_legible_soon)
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.scene().sigMouseClicked.connect(self._on_mouse_clicked)

    # -- a legible minimum --------------------------------------------------------------
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._check_legible_soon()

    def showEvent(self, event) -> None:
        # a figure laid out while hidden (built ahead or while idle) was never checked: its
        # view box may have been crushed since by a colour bar or a long token label
        super().showEvent(event)
        self._check_legible_soon()

    def _check_legible_soon(self, *_) -> None:
        if not getattr(self, "_legible_pending", True):
            # once pyqtgraph has laid out the title and axes (its layout runs after this event)
            self._legible_pending = True
            QTimer.singleShot(0, self, self.keep_legible)

    def chrome(self) -> QSize:
        """What the title, the axes, their labels and a colour bar take around the view box."""
        box = self.plot.vb.sceneBoundingRect()
        return QSize(max(0, self.width() - int(box.width())), max(0, self.height() - int(box.height())))

    def keep_legible(self) -> None:
        """The figure's minimum size: its chrome plus a legible view box (VIEW_BOX_LEAST), so a
        narrow window scrolls or reflows the plots rather than crushing them."""
        self._legible_pending = False
        if not self.isVisible():
            return
        chrome = self.chrome()
        want = QSize(max(FIGURE_LEAST.width(), chrome.width() + VIEW_BOX_LEAST.width()),
                     max(FIGURE_LEAST.height(), chrome.height() + VIEW_BOX_LEAST.height()))
        least = self.minimumSize()
        if abs(want.width() - least.width()) > 2 or abs(want.height() - least.height()) > 2:
            self.setMinimumSize(want)

    def finish(self) -> None:
        """Make what the figure makes only when first needed (a heatmap's colour bar): the
        window calls it in an idle turn of its own, so building a view stays short."""

    @property
    def finished(self) -> bool:
        """Nothing left for finish() to make."""
        return True

    def set_axis_labels(self, x_label: str, y_label: Optional[str] = None) -> None:
        self.plot.setLabel("bottom", x_label, **LABEL_STYLE)
        if y_label is not None:
            self.plot.setLabel("left", y_label, **LABEL_STYLE)

    @property
    def figure(self) -> pg.GraphicsLayout:
        """The item to export: it holds the title, the axes and any colour bar."""
        return self.ci

    def set_title(self, title: str) -> None:
        self.title = title
        self.title_label.set_full_text(title)

    # -- overridden by the plot kinds ---------------------------------------------------
    def hover_at(self, x: float, y: float) -> Optional[str]:
        return None

    def token_at(self, x: float, y: float) -> Optional[int]:
        return None

    def cell_at(self, x: float, y: float) -> Optional[tuple[int, int]]:
        return None

    # -- mouse --------------------------------------------------------------------------
    def _data_point(self, scene_pos) -> Optional[QPointF]:
        view = self.plot.vb
        if not view.sceneBoundingRect().contains(scene_pos):
            return None
        return view.mapSceneToView(scene_pos)

    def _on_mouse_moved(self, scene_pos) -> None:
        point = self._data_point(scene_pos)
        text = self.hover_at(point.x(), point.y()) if point is not None else None
        if text:
            self.hovered.emit(text)
            QToolTip.showText(QCursor.pos(), text, self)
        else:
            QToolTip.hideText()

    def _on_mouse_clicked(self, event) -> None:
        if event.button() != pg.QtCore.Qt.MouseButton.LeftButton or event.double():
            return
        point = self._data_point(event.scenePos())
        if point is None:
            return
        self.click_at(point.x(), point.y(), event.modifiers())

    def click_at(self, x: float, y: float, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
        """A left click at data point (x, y): select a token, or ask where a value comes from."""
        explain = bool(modifiers & (Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ControlModifier))
        index = None if explain else self.token_at(x, y)
        if index is not None:
            self.tokenClicked.emit(int(index))
            return
        cell = self.cell_at(x, y)
        if cell is not None:
            self.cellClicked.emit(int(cell[0]), int(cell[1]))


def nearest_index(value: float, count: int) -> Optional[int]:
    i = int(round(value))
    return i if 0 <= i < count else None
