"""A figure drawn at `factor` times its size with its lines as thick as on screen, relative to
the figure: a 2x PNG is the 1x figure at twice the resolution.

Painting through a scaled QPainter scales geometry, text and images, but not two things
pyqtgraph relies on: cosmetic pens (pg.mkPen's, 1 pixel wide whatever the scale) and items
that ignore transformations (a LegendItem keeps its size in device pixels). For the duration
of an export both are made to follow the scale; everything is restored afterwards."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Optional

import pyqtgraph as pg
from PySide6.QtGui import QBrush, QImage, QPainter, QPen, QTransform
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractGraphicsShapeItem, QGraphicsItem

IGNORES_TRANSFORMATIONS = QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations


@contextmanager
def scaled(item, factor: float) -> Iterator[None]:
    """Thicken the cosmetic pens of `item` and its descendants by `factor`, and let legends
    scale with the painter, until the block ends."""
    if factor == 1:
        yield
        return
    undo: list[Callable[[], None]] = []
    for child in _descendants(item):
        restore = _scale_item(child, factor)
        if restore is not None:
            undo.append(restore)
    try:
        yield
    finally:
        for restore in reversed(undo):
            restore()


def thicker(pen, factor: float) -> Optional[QPen]:
    """`pen` `factor` times as wide if it is cosmetic (drawn in device pixels), else None."""
    if pen is None:
        return None
    pen = QPen(pen) if isinstance(pen, QPen) else pg.mkPen(pen)
    if pen.style() == Qt.PenStyle.NoPen or not pen.isCosmetic():
        return None
    pen.setWidthF(max(pen.widthF(), 1.0) * factor)
    return pen


def _scale_item(child, factor: float) -> Optional[Callable[[], None]]:
    if isinstance(child, pg.LegendItem):
        return _scale_legend(child, factor)
    if isinstance(child, pg.PlotDataItem):
        return _scale_opts_pen(child, "pen", child.setPen, factor)
    if isinstance(child, pg.PlotCurveItem) and not isinstance(child.parentItem(), pg.PlotDataItem):
        return _scale_opts_pen(child, "pen", child.setPen, factor)
    if isinstance(child, pg.AxisItem):
        return _swap_pen(child.pen(), child.setPen, factor)
    if isinstance(child, pg.InfiniteLine):
        return _swap_pen(child.pen, child.setPen, factor)
    if isinstance(child, pg.BarGraphItem):
        return _scale_bars(child, factor)
    if isinstance(child, QAbstractGraphicsShapeItem):
        return _scale_shape(child, factor)
    return None


def _swap_pen(pen, setter, factor: float) -> Optional[Callable[[], None]]:
    wider = thicker(pen, factor)
    if wider is None:
        return None
    old = QPen(pen)
    setter(wider)
    return lambda: setter(old)


def _scale_opts_pen(child, key: str, setter, factor: float) -> Optional[Callable[[], None]]:
    pen = child.opts.get(key)
    wider = thicker(pen, factor)
    if wider is None:
        return None
    setter(wider)
    return lambda: setter(pen)


def _scale_bars(bars: pg.BarGraphItem, factor: float) -> Optional[Callable[[], None]]:
    changes = {}
    if thicker(bars.opts.get("pen"), factor) is not None:
        changes["pen"] = thicker(bars.opts["pen"], factor)
    pens = bars.opts.get("pens")
    if pens is not None and any(thicker(p, factor) is not None for p in pens):
        changes["pens"] = [thicker(p, factor) or p for p in pens]
    if not changes:
        return None
    old = {key: bars.opts.get(key) for key in changes}
    bars.setOpts(**changes)
    return lambda: bars.setOpts(**old)


def _scale_shape(shape: QAbstractGraphicsShapeItem, factor: float) -> Optional[Callable[[], None]]:
    """A rectangle's outline, and its hatching (a pattern brush is drawn in device pixels)."""
    pen, brush = QPen(shape.pen()), QBrush(shape.brush())
    wider = thicker(pen, factor)
    pattern = brush.style() not in (Qt.BrushStyle.NoBrush, Qt.BrushStyle.SolidPattern) \
        and brush.gradient() is None and brush.texture().isNull()
    if wider is None and not pattern:
        return None
    if wider is not None:
        shape.setPen(wider)
    if pattern:
        shape.setBrush(_texture_of(brush, shape))

    def restore() -> None:
        shape.setPen(pen)
        shape.setBrush(brush)
    return restore


def _texture_of(brush: QBrush, shape: QGraphicsItem) -> QBrush:
    """A pattern brush (drawn in device pixels, whatever the painter's scale) as a texture of
    the same 8 x 8 tile, which the painter scales; its texels are made one scene pixel each,
    whatever the item's own scale (a heatmap's is cells, not pixels)."""
    tile = QImage(8, 8, QImage.Format.Format_ARGB32_Premultiplied)
    tile.fill(Qt.GlobalColor.transparent)
    painter = QPainter(tile)
    painter.fillRect(0, 0, 8, 8, brush)
    painter.end()
    texture = QBrush(tile)
    to_scene = shape.sceneTransform()
    sx, sy = abs(to_scene.m11()) or 1.0, abs(to_scene.m22()) or 1.0
    texture.setTransform(QTransform.fromScale(1 / sx, 1 / sy))
    return texture


def _scale_legend(legend: pg.LegendItem, factor: float) -> Callable[[], None]:
    """A legend ignores transformations (its size is in device pixels): here it follows the
    painter's scale. Its parent (the view box) is not scaled, so it stays where it is."""
    ignores = bool(legend.flags() & IGNORES_TRANSFORMATIONS)
    legend.setFlag(IGNORES_TRANSFORMATIONS, False)
    pen = QPen(legend.pen())
    wider = thicker(pen, factor)
    if wider is not None:
        legend.setPen(wider)

    def restore() -> None:
        legend.setFlag(IGNORES_TRANSFORMATIONS, ignores)
        legend.setPen(pen)
    return restore


def _descendants(item) -> Iterator:
    yield item
    for child in item.childItems():
        yield from _descendants(child)
