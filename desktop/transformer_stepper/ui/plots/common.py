"""What every figure shares: the colours and fonts, one brush per colour, the exact value as
written, and the checks that keep NaN/Inf out of ranges and levels. The figure itself is
`figure.Figure`, its axis `axis.LabelAxis`, its title `title.TitleLabel`."""
from __future__ import annotations

import math
import weakref
from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QGraphicsItem

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


def nearest_index(value: float, count: int) -> Optional[int]:
    i = int(round(value))
    return i if 0 <= i < count else None
