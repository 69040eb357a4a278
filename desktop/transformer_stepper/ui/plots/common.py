"""What every figure shares: a token-labelled axis, hover and click mapped to data coordinates,
the colours and fonts. A figure is a GraphicsLayoutWidget whose layout (`figure`) stands on its
own: title, axis labels, colour bar; it is what gets exported."""
from __future__ import annotations

import math
import weakref
from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QCursor, QFont, QFontMetrics
from PySide6.QtWidgets import QGraphicsItem, QToolTip, QWidget

SELECTED = QColor("#ff7f0e")          # the selected token, in every plot
HIGHLIGHT_PEN = pg.mkPen(SELECTED, width=2.5)
INK = QColor("#222222")
MUTED = QColor("#9a9a9a")
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f")
BAR_BRUSH = QColor("#4c78a8")
TITLE_POINTS = 11
TITLE_SIZE = f"{TITLE_POINTS}pt"
LABEL_STYLE = {"font-size": "10pt", "color": "#222"}
TICK_FONT_POINTS = 9

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

    def tickValues(self, minVal, maxVal, size):
        if not self.labels:
            return super().tickValues(minVal, maxVal, size)
        lo = max(0, math.ceil(min(minVal, maxVal) - 1e-6))
        hi = min(len(self.labels) - 1, math.floor(max(minVal, maxVal) + 1e-6))
        if hi < lo or size <= 0:
            return []
        step = max(1, math.ceil((hi - lo + 1) * self._label_pixels / size))
        first = lo + (-lo) % step
        chosen: list[int] = []
        for i in self.emphasis:            # a later one may not crowd an earlier one
            if lo <= i <= hi and all(abs(i - c) >= step for c in chosen):
                chosen.append(i)
        # every step-th label, but never one that would overlap an emphasised label
        regular = [v for v in range(first, hi + 1, step) if all(abs(v - c) >= step for c in chosen)]
        return [(step, sorted(chosen + regular))]

    def tickStrings(self, values, scale, spacing):
        if not self.labels:
            return super().tickStrings(values, scale, spacing)
        out = []
        for v in values:
            i = int(round(v))
            label = self.labels[i] if 0 <= i < len(self.labels) else ""
            out.append(_shorten(label))
        return out


def _shorten(label: str, limit: int = 16) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


class TitleLabel(pg.LabelItem):
    """A figure title that never forces the figure wider than its window: too long a title is
    shortened with '…' (pyqtgraph's LabelItem makes its text width the minimum width)."""

    def __init__(self, text: str, points: int = TITLE_POINTS, color: str = "#222") -> None:
        self.full_text = text
        self.points = points
        super().__init__(text, size=f"{points}pt", color=color)

    def set_full_text(self, text: str) -> None:
        self.full_text = text
        self._elide()

    def _elide(self) -> None:
        font = QFont()
        font.setPointSize(self.points)
        available = max(int(self.width()) - 8, 40)
        shown = QFontMetrics(font).elidedText(self.full_text, Qt.TextElideMode.ElideRight, available)
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
        self.setMinimumSize(160, 130)
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.scene().sigMouseClicked.connect(self._on_mouse_clicked)

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
