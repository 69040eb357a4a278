"""Rendering one figure (a pyqtgraph GraphicsLayout or PlotItem) to a PNG image or to SVG.

Both go through pyqtgraph's exporter machinery (`Exporter.setExportMode`, so scatter symbols
are drawn as vectors and sized for the output resolution) and paint the figure's scene into a
QImage or a QSvgGenerator. pyqtgraph 0.14's own SVGExporter fails on PySide6 >= 6.11
(pyqtgraph issue #3485); Qt's QSvgGenerator works on every version we support, and svg.py
fixes what it writes so other renderers draw it as Qt does.

A figure exported with a size is laid out at that size for the duration of the export (the
on-screen figure is restored before the event loop runs again); `size=None` exports it as shown.
Rendering must happen on the GUI thread; encoding the result (`encode`) may not. Each figure
format is one writer in WRITERS, beside its entry in io/export_formats.py."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Optional

import pyqtgraph as pg
from pyqtgraph.exporters import Exporter
from PySide6.QtCore import QBuffer, QByteArray, QCoreApplication, QEvent, QIODevice, QRectF, QSize
from PySide6.QtGui import QColor, QImage, QPainter, QPen, QPicture
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsWidget

from ...core.model.stages import Stage
from ...io.array_export import layer_head_suffix
from ...io.export_formats import DEFAULT_FIGURE_FORMAT, figure_format_names
from . import metadata, scaling, svg

FORMATS = figure_format_names()        # io/export_formats.py: the menus, dialogs and --format read it
SCALES = (1, 2, 4)
DEFAULT_SIZE = (800, 600)          # logical pixels of a figure exported on its own
LIGHT_BACKGROUND = QColor("#ffffff")
DARK_BACKGROUND = QColor("#161616")
DARK_INK = QColor("#e8e8e8")
DARK_LEGEND = QColor(22, 22, 22, 210)


@dataclass(frozen=True)
class ExportOptions:
    format: str = DEFAULT_FIGURE_FORMAT        # a FORMATS name: "png" or "svg"
    scale: float = 1.0                         # PNG pixels per logical pixel (SVG: its size)
    dark: bool = False                         # dark background, light ink
    size: Optional[tuple[int, int]] = DEFAULT_SIZE   # None: the size the figure has now

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format {self.format!r}: expected one of {', '.join(FORMATS)}")
        if not 0.1 <= self.scale <= 16:
            raise ValueError(f"scale {self.scale}: expected 0.1 … 16")

    @property
    def background(self) -> QColor:
        return DARK_BACKGROUND if self.dark else LIGHT_BACKGROUND


def plot_file_name(stage: Stage, plot: str, layer: int, head: int, file_format: str, config=None) -> str:
    """`07-softmax-attention_weights-L0H3.png`: stage number (two digits, so files sort in
    stepping order; numbered for `config`'s model: Stage.number_for), stage, plot, and the
    layer and head where the stage depends on them."""
    return (f"{stage.number_for(config):02d}-{stage.key}-{plot}{layer_head_suffix(stage, layer, head)}"
            f".{file_format}")


# -- rendering ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rendered:
    """What the GUI thread hands to a writer: its format and what its renderer made (a PNG's
    image, the SVG text Qt wrote)."""
    format: str
    image: Optional[QImage] = None
    svg: Optional[bytes] = None


Facts = Optional[Mapping[str, str]]


@dataclass(frozen=True)
class FigureWriter:
    """How one figure format is made: `render(item, options, title, description)` paints the
    figure (GUI thread); `finish(rendered, facts, caption)` makes the file's bytes with the
    figure's facts (metadata.py) and, when given, a caption line under it written in (any
    thread)."""
    render: Callable[..., Rendered]
    finish: Callable[[Rendered, Facts, Optional[str]], bytes]


def render(item, options: ExportOptions, title: str = "", description: str = "") -> Rendered:
    return WRITERS[options.format].render(item, options, title, description)


def encode(rendered: Rendered, facts: Facts = None, caption: Optional[str] = None) -> bytes:
    """The file's bytes (any thread): PNG-encode the image, or tidy the SVG; with `facts`, those
    written in, and with `caption` too, a line under the figure."""
    return WRITERS[rendered.format].finish(rendered, facts, caption if facts else None)


def _render_png(item, options: ExportOptions, title: str = "", description: str = "") -> Rendered:
    return Rendered("png", image=render_png(item, options))


def _finish_png(rendered: Rendered, facts: Facts, caption: Optional[str]) -> bytes:
    image = rendered.image if caption is None else metadata.captioned_image(rendered.image, caption)
    data = png_bytes(image)
    return metadata.png_with_text(data, facts) if facts else data


def _render_svg(item, options: ExportOptions, title: str = "", description: str = "") -> Rendered:
    return Rendered("svg", svg=render_svg(item, options, title, description))


def _finish_svg(rendered: Rendered, facts: Facts, caption: Optional[str]) -> bytes:
    data = svg.finish(rendered.svg)
    return metadata.svg_with_metadata(data, facts, caption) if facts else data


# one writer per registered figure format (io/export_formats.py)
WRITERS: dict[str, FigureWriter] = {
    "png": FigureWriter(_render_png, _finish_png),
    "svg": FigureWriter(_render_svg, _finish_svg),
}
if set(WRITERS) != set(FORMATS):
    raise TypeError(f"figure formats without a writer: {sorted(set(FORMATS) - set(WRITERS))}; "
                    f"writers without a format: {sorted(set(WRITERS) - set(FORMATS))}")


def render_png(item, options: ExportOptions) -> QImage:
    with _prepared(item, options, options.scale) as (width, height):
        size = QSize(max(1, round(width * options.scale)), max(1, round(height * options.scale)))
        image = QImage(size, QImage.Format.Format_RGB32)
        image.fill(options.background)
        # Painted at the resolution the figure was laid out at; the scale is the painter's
        # alone. The axes are cached as QPictures, which QPainter rescales by the ratio of the
        # device's resolution to the one they were recorded at: an image that already claims
        # scale × that resolution would get their text and ticks scaled twice (the zoomed-in
        # crop a 2x export used to be).
        image.setDotsPerMeterX(round(_dpi() / 0.0254))
        image.setDotsPerMeterY(round(_dpi() / 0.0254))
        painter = QPainter(image)
        try:
            _paint(item, painter, QRectF(0, 0, size.width(), size.height()), options)
        finally:
            painter.end()
        dots_per_metre = round(_dpi() * options.scale / 0.0254)   # the file prints at the 1x size
        image.setDotsPerMeterX(dots_per_metre)
        image.setDotsPerMeterY(dots_per_metre)
    return image


def render_svg(item, options: ExportOptions, title: str = "", description: str = "") -> bytes:
    with _prepared(item, options) as (width, height):
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        generator = QSvgGenerator()
        generator.setOutputDevice(buffer)
        # the resolution the figure was laid out at: axes are cached as QPictures, which
        # QPainter rescales to the device's resolution (72 dpi would shrink them by a quarter)
        generator.setResolution(_dpi())
        generator.setSize(QSize(round(width * options.scale), round(height * options.scale)))
        generator.setViewBox(QRectF(0, 0, width, height))
        generator.setTitle(title)
        generator.setDescription(description)
        painter = QPainter(generator)
        try:
            painter.fillRect(QRectF(0, 0, width, height), options.background)
            _paint(item, painter, QRectF(0, 0, width, height), options, resolution_scale=1.0)
        finally:
            painter.end()
        buffer.close()
    return bytes(data)


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise RuntimeError("Qt could not encode the PNG")
    buffer.close()
    return bytes(data)


def _dpi() -> int:
    return QPicture().logicalDpiX()


def _paint(item, painter: QPainter, target: QRectF, options: ExportOptions,
           resolution_scale: Optional[float] = None) -> None:
    exporter = Exporter(item)        # pyqtgraph's base: export mode for every painted item
    source = item.sceneBoundingRect()
    scale = target.width() / source.width() if resolution_scale is None else resolution_scale
    exporter.setExportMode(True, {"antialias": True, "background": options.background,
                                  "painter": painter, "resolutionScale": scale})
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        item.scene().render(painter, target, source)
    finally:
        exporter.setExportMode(False)


# -- preparing the figure: its export size and its colours ----------------------------------
@contextmanager
def _prepared(item, options: ExportOptions, scale: float = 1.0) -> Iterator[tuple[float, float]]:
    """The figure at its export size and colours, its lines and legends made to follow a
    painter scaled by `scale` (a PNG's; an SVG is drawn at its own size)."""
    with _sized(item, options.size) as (width, height), _themed(item, options.dark), \
            scaling.scaled(item, scale):
        _settle(item)
        yield width, height


def _settle(item) -> None:
    """Give the axes the room their tick labels need before painting. An AxisItem learns how
    wide its labels are only while painting, and then asks for a new layout, which on screen
    the next repaint shows; an export paints once, so it measures first (twice: a wider left
    axis narrows the plot, which may change the bottom axis's labels)."""
    scene = item.scene()
    if hasattr(scene, "prepareForPaint"):
        scene.prepareForPaint()      # pending auto-ranges, which scene.render() would do later
    axes = [child for child in _descendants(item) if isinstance(child, pg.AxisItem) and child.isVisible()]
    for axis in axes:
        # measured afresh: an axis keeps a wider text space until it is 10 px too wide, so a
        # figure's layout would depend on what it showed before
        axis.textWidth = axis.textHeight = 0
    for _ in range(2):
        for axis in axes:
            # on the device and in the font its paint() measures with, or the widths differ
            scratch = QPicture()
            painter = QPainter(scratch)
            try:
                if axis.style["tickFont"]:
                    painter.setFont(axis.style["tickFont"])
                axis.generateDrawSpecs(painter)
            finally:
                painter.end()
        # what asked to be laid out again (axis sizes, new labels) is, as the event loop would
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        layout = QGraphicsWidget.layout(item)
        if layout is not None:
            layout.activate()


@contextmanager
def _sized(item, size: Optional[tuple[int, int]]) -> Iterator[tuple[float, float]]:
    """Lay a top-level figure out at `size` for the export; an item inside another layout
    keeps the size it has."""
    old = item.geometry()
    resize = size is not None and item.parentItem() is None and (old.width(), old.height()) != tuple(size)
    if resize:
        _set_geometry(item, QRectF(old.x(), old.y(), size[0], size[1]))
    try:
        rect = item.geometry()
        yield rect.width(), rect.height()
    finally:
        if resize:
            _set_geometry(item, old)


def _set_geometry(item, rect: QRectF) -> None:
    item.setGeometry(rect)
    layout = QGraphicsWidget.layout(item)   # GraphicsLayout shadows layout() with an attribute
    if layout is not None:
        layout.activate()                    # lay the children out now, not at the next event


@contextmanager
def _themed(item, dark: bool) -> Iterator[None]:
    """Light ink on a dark background: axes, titles, labels, legends, and neutral grey lines
    drawn on the background (lines over a heatmap keep their colour)."""
    if not dark:
        yield
        return
    undo: list = []
    items = list(_descendants(item))
    over_image = any(isinstance(i, pg.ImageItem) for i in items)
    ink = DARK_INK.name()
    for child in items:
        if isinstance(child, pg.AxisItem):
            undo.append(_recolour_axis(child, ink))
        elif isinstance(child, pg.LabelItem):
            old = child.opts.get("color")
            child.setText(child.text, color=ink)
            undo.append(lambda c=child, o=old: c.setText(c.text, color=o))
        elif isinstance(child, pg.LegendItem):
            brush, pen = child.brush(), child.pen()
            child.setBrush(DARK_LEGEND)
            child.setPen(pg.mkPen("#666"))
            undo.append(lambda c=child, b=brush, p=pen: (c.setBrush(b), c.setPen(p)))
        elif isinstance(child, pg.PlotDataItem) and not over_image:
            pen = child.opts.get("pen")
            lighter = _lightened(pg.mkPen(pen)) if pen is not None else None
            if lighter is not None:
                child.setPen(lighter)
                undo.append(lambda c=child, p=pen: c.setPen(p))
        elif isinstance(child, pg.InfiniteLine) and not over_image:
            pen = QPen(child.pen)
            lighter = _lightened(pen)
            if lighter is not None:
                child.setPen(lighter)
                undo.append(lambda c=child, p=pen: c.setPen(p))
    try:
        yield
    finally:
        for restore in reversed(undo):
            restore()


def _recolour_axis(axis: pg.AxisItem, ink: str):
    pen, text_pen, style = QPen(axis.pen()), QPen(axis.textPen()), dict(axis.labelStyle)
    axis.setPen(pg.mkPen(ink))
    axis.setTextPen(pg.mkPen(ink))
    axis.labelStyle = {**style, "color": ink}
    axis.label.setHtml(axis.labelString())

    def restore() -> None:
        axis.setPen(pen)
        axis.setTextPen(text_pen)
        axis.labelStyle = style
        axis.label.setHtml(axis.labelString())
    return restore


def _lightened(pen: QPen) -> Optional[QPen]:
    """A dark neutral grey or black pen, mirrored to the light side (None: leave it)."""
    colour = pen.color()
    if pen.style() == pg.QtCore.Qt.PenStyle.NoPen or colour.hslSaturationF() > 0.15 \
            or colour.lightnessF() > 0.45:
        return None
    pen = QPen(pen)
    pen.setColor(QColor.fromHslF(0.0, 0.0, 1.0 - colour.lightnessF(), colour.alphaF()))
    return pen


def _descendants(item) -> Iterator:
    yield item
    for child in item.childItems():
        yield from _descendants(child)

