"""Tidying the SVG that Qt's QSvgGenerator writes, so that renderers other than Qt's (librsvg,
Inkscape, browsers, LaTeX converters) draw it the way Qt does.

- pyqtgraph draws lines with cosmetic pens (a width in screen pixels) inside scaled data
  coordinates; Qt writes them as `vector-effect="non-scaling-stroke"` under a scaling group,
  which librsvg and ImageMagick ignore (every line becomes a band as wide as a data unit).
  Such groups are flattened: their shapes' coordinates are mapped to the parent's, so a plain
  stroke width is right everywhere.
- A heatmap is an image of one pixel per cell stretched by the group's transform; most
  renderers smooth it into a blur. Small images are enlarged with nearest-neighbour cells.
- Qt's font family ("Sans Serif") is not a CSS generic; `sans-serif` is appended as fallback.

Pure text work on the generator's output (no painting), so it may run in a worker thread."""
from __future__ import annotations

import base64
import math
import re
import xml.etree.ElementTree as ET
from typing import Optional

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtGui import QImage

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)

_SHAPES = {f"{{{SVG_NS}}}{name}" for name in ("path", "polyline", "polygon", "rect", "line")}
_GROUP = f"{{{SVG_NS}}}g"
_IMAGE = f"{{{SVG_NS}}}image"
_HREF = f"{{{XLINK_NS}}}href"
_MATRIX = re.compile(r"^\s*matrix\(([^)]*)\)\s*$")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_GENERIC_FONTS = ("serif", "sans-serif", "monospace", "cursive", "fantasy", "system-ui")
MAX_IMAGE_SIDE = 2048          # enlarged heatmap images stay below this many pixels a side
CELL_PIXELS = 2                # output pixels per displayed pixel (crisp when zoomed 2x)

Matrix = tuple[float, float, float, float, float, float]


def finish(data: bytes) -> bytes:
    """Qt's SVG -> the same drawing, portable (see the module docstring)."""
    root = ET.fromstring(data)
    patterns = {f"url(#{e.get('id')})" for e in root.iter(f"{{{SVG_NS}}}pattern")}
    for group in root.iter(_GROUP):
        matrix = _matrix(group.get("transform"))
        if matrix is None:
            continue
        if _flattenable(group, patterns):
            for child in group:
                _map_shape(child, matrix)
                child.attrib.pop("vector-effect", None)
            del group.attrib["transform"]
        else:
            for child in group:
                if child.tag == _IMAGE:
                    _enlarge_image(child, matrix)
    for element in root.iter():
        family = element.get("font-family")
        if family and not any(g in family.lower().replace('"', "").split(",") for g in _GENERIC_FONTS):
            element.set("font-family", f"{family}, sans-serif")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _matrix(transform: Optional[str]) -> Optional[Matrix]:
    if not transform:
        return None
    match = _MATRIX.match(transform)
    if match is None:
        return None
    values = [float(v) for v in match.group(1).replace(",", " ").split()]
    if len(values) != 6:
        return None
    if values == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]:
        return None
    return tuple(values)  # type: ignore[return-value]


def _flattenable(group: ET.Element, patterns: set[str]) -> bool:
    """Only plain shapes whose strokes do not scale (or that have no stroke), no gradients or
    clipping that live in the group's coordinates. A hatch pattern fill is fine, and better
    flattened: Qt draws hatching in device pixels, the SVG pattern lives in user units."""
    children = list(group)
    if not children or any(child.tag not in _SHAPES for child in children):
        return False
    fill = group.get("fill", "")
    if ("url(" in fill and fill not in patterns) or group.get("clip-path") \
            or "url(" in group.get("stroke", ""):
        return False
    stroked = group.get("stroke", "none") != "none"
    for child in children:
        if stroked and child.get("vector-effect") != "non-scaling-stroke":
            return False
        if "url(" in child.get("fill", "") or child.get("clip-path") or child.get("transform"):
            return False
        if child.tag.endswith("}path") and re.search(r"[^MLCZ0-9eE.,+\-\s]", child.get("d", "")):
            return False         # arcs, relative or H/V commands: leave the group as it is
    return True


def _apply(matrix: Matrix, x: float, y: float) -> tuple[float, float]:
    a, b, c, d, e, f = matrix
    return a * x + c * y + e, b * x + d * y + f


def _fmt(value: float) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _map_points(text: str, matrix: Matrix) -> str:
    numbers = [float(v) for v in _NUMBER.findall(text)]
    pairs = [_apply(matrix, numbers[i], numbers[i + 1]) for i in range(0, len(numbers) - 1, 2)]
    return " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in pairs)


def _map_path(d: str, matrix: Matrix) -> str:
    out = []
    for command, arguments in re.findall(r"([MLCZ])([^MLCZ]*)", d):
        out.append(command + (_map_points(arguments, matrix) if arguments.strip() else ""))
    return " ".join(out)


def _map_shape(element: ET.Element, matrix: Matrix) -> None:
    tag = element.tag.rsplit("}", 1)[-1]
    if tag == "path":
        element.set("d", _map_path(element.get("d", ""), matrix))
    elif tag in ("polyline", "polygon"):
        element.set("points", _map_points(element.get("points", ""), matrix))
    elif tag == "line":
        x1, y1 = _apply(matrix, float(element.get("x1", 0)), float(element.get("y1", 0)))
        x2, y2 = _apply(matrix, float(element.get("x2", 0)), float(element.get("y2", 0)))
        element.attrib.update(x1=_fmt(x1), y1=_fmt(y1), x2=_fmt(x2), y2=_fmt(y2))
    elif tag == "rect":
        x, y = float(element.get("x", 0)), float(element.get("y", 0))
        w, h = float(element.get("width", 0)), float(element.get("height", 0))
        corners = [_apply(matrix, px, py) for px, py in ((x, y), (x + w, y), (x + w, y + h), (x, y + h))]
        a, b, c, d, _, _ = matrix
        if b == 0 and c == 0:                       # still a rectangle: keep it one
            xs, ys = [p[0] for p in corners], [p[1] for p in corners]
            element.attrib.update(x=_fmt(min(xs)), y=_fmt(min(ys)),
                                  width=_fmt(max(xs) - min(xs)), height=_fmt(max(ys) - min(ys)))
        else:                                       # rotated or sheared: a polygon
            element.tag = f"{{{SVG_NS}}}polygon"
            for name in ("x", "y", "width", "height", "rx", "ry"):
                element.attrib.pop(name, None)
            element.set("points", " ".join(f"{_fmt(px)},{_fmt(py)}" for px, py in corners))


def _enlarge_image(element: ET.Element, matrix: Matrix) -> None:
    href = element.get(_HREF, "")
    prefix = "data:image/png;base64,"
    if not href.startswith(prefix):
        return
    image = QImage.fromData(base64.b64decode(href[len(prefix):]), "PNG")
    if image.isNull():
        return
    a, b, c, d, _, _ = matrix
    width, height = float(element.get("width", image.width())), float(element.get("height", image.height()))
    shown_x = math.hypot(a, b) * width / image.width()       # output pixels per image pixel
    shown_y = math.hypot(c, d) * height / image.height()
    kx = _factor(shown_x, image.width())
    ky = _factor(shown_y, image.height())
    if kx == 1 and ky == 1:
        return
    bigger = image.scaled(image.width() * kx, image.height() * ky,
                          Qt.AspectRatioMode.IgnoreAspectRatio, Qt.TransformationMode.FastTransformation)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    bigger.save(buffer, "PNG")
    buffer.close()
    element.set(_HREF, prefix + base64.b64encode(bytes(data)).decode("ascii"))


def _factor(shown: float, pixels: int) -> int:
    if shown <= 1.5:
        return 1
    return max(1, min(math.ceil(shown * CELL_PIXELS), MAX_IMAGE_SIDE // max(pixels, 1)))
