"""Figures that say where they came from: the facts of an exported figure (model name and
fingerprint, text, stage, layer, head, selected token, app version), written into the file
after it is rendered — PNG tEXt chunks after the header, an SVG <metadata> element — and, when
the user asks for it (a preference, off by default), one caption line under the figure.

It acts on the finished image or bytes only, so rendering (render.py) is untouched."""
from __future__ import annotations

import re
import struct
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Optional
from xml.sax.saxutils import escape, quoteattr

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QImage, QPainter

from ... import __version__
from ...core.model import stages
from ...core.model.errors import ModelError
from ...io.session_file import model_fingerprint

KEY_PREFIX = "transformer-stepper:"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def model_folder(model) -> Optional[str]:
    """Where the model came from as the session file names it: its folder (when its weights
    sit beside a config.json), its lone file, or None for the built-in model."""
    from ...io.resources import builtin_model_dir

    source = Path(model.source) if model.source else None
    if source is None:
        return None
    folder = source.parent if (source.parent / "config.json").is_file() else source
    try:
        if folder.resolve() == builtin_model_dir().resolve():
            return None
    except OSError:
        pass
    return str(folder)


@lru_cache(maxsize=8)
def _fingerprint(path: Optional[str]) -> str:
    try:
        return model_fingerprint(path)
    except ModelError:
        return "unknown (the model's files could not be read)"


def figure_facts(model, trace, stage_key: str, layer: int, head: int, selected: int) -> dict[str, str]:
    stage = stages.stage(stage_key)
    token = trace.tokens[selected] if 0 <= selected < trace.n_seq else "—"
    facts = {"model": model.name, "model_fingerprint": _fingerprint(model_folder(model)),
             "text": trace.text, "stage": f"{stage.number}. {stage.title}",
             "layer": str(layer) if stage.per_layer else "—", "head": str(head) if stage.per_head else "—",
             "selected_token": f"{selected} {token!r}", "app_version": f"transformer-stepper {__version__}"}
    if trace.interventions:
        from ...core.model.interventions import describe_all

        facts["interventions"] = describe_all(trace.interventions)
    return facts


def caption_line(facts: Mapping[str, str]) -> str:
    where = ", ".join(f"{k} {facts[k]}" for k in ("layer", "head") if facts[k] != "—")
    text = facts["text"] if len(facts["text"]) <= 80 else facts["text"][:79] + "…"
    return (f"{facts['model']} · {facts['stage']}" + (f" · {where}" if where else "")
            + f" · token {facts['selected_token']} · “{text}” · {facts['app_version']}")


# -- PNG ------------------------------------------------------------------------------------------
def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_with_text(data: bytes, facts: Mapping[str, str]) -> bytes:
    """The PNG with one iTXt chunk (UTF-8) per fact, right after IHDR."""
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    ihdr_end = 8 + 12 + struct.unpack(">I", data[8:12])[0]
    chunks = b"".join(_chunk(b"iTXt", (KEY_PREFIX + key).encode("latin-1") + b"\0\0\0\0\0"
                             + str(value).encode("utf-8")) for key, value in facts.items())
    return data[:ihdr_end] + chunks + data[ihdr_end:]


def read_png_text(data: bytes) -> dict[str, str]:
    """The tEXt / iTXt facts of a PNG written by png_with_text (for tests and users)."""
    found, at = {}, 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I", data[at:at + 4])[0], data[at + 4:at + 8]
        body = data[at + 8:at + 8 + length]
        if kind == b"iTXt" and body[body.index(b"\0") + 1] == 0:          # uncompressed
            key, rest = body.split(b"\0", 1)
            _language, rest = rest[2:].split(b"\0", 1)
            _translated, value = rest.split(b"\0", 1)
            found[key.decode("latin-1").removeprefix(KEY_PREFIX)] = value.decode("utf-8")
        elif kind == b"tEXt":
            key, value = body.split(b"\0", 1)
            found[key.decode("latin-1").removeprefix(KEY_PREFIX)] = value.decode("latin-1")
        at += 12 + length
    return found


def captioned_image(image: QImage, line: str) -> QImage:
    """The image with a strip under it holding `line`."""
    height = max(18, image.height() // 25)
    out = QImage(image.width(), image.height() + height, image.format())
    out.fill(QColor("white"))
    out.setDotsPerMeterX(image.dotsPerMeterX())
    out.setDotsPerMeterY(image.dotsPerMeterY())
    painter = QPainter(out)
    try:
        painter.drawImage(0, 0, image)
        font = painter.font()
        font.setPixelSize(max(9, int(height * 0.6)))
        painter.setFont(font)
        painter.setPen(QColor("#333333"))
        painter.drawText(QRectF(6, image.height(), image.width() - 12, height),
                         int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), line)
    finally:
        painter.end()
    return out


# -- SVG ------------------------------------------------------------------------------------------
def svg_with_metadata(data: bytes, facts: Mapping[str, str], caption: Optional[str] = None) -> bytes:
    """The SVG with a <metadata> element (one <ts:fact name=...> per fact) after its root tag
    and, with `caption`, a line of text added under the drawing (the view box grown to hold it)."""
    text = data.decode("utf-8")
    root = re.search(r"<svg\b[^>]*>", text)
    if root is None:
        raise ValueError("not an SVG")
    items = "".join(f"<ts:fact name={quoteattr(k)}>{escape(str(v))}</ts:fact>" for k, v in facts.items())
    meta = (f'<metadata><ts:figure xmlns:ts="https://transformer-stepper.invalid/figure">{items}'
            f"</ts:figure></metadata>")
    tag = root.group(0)
    extra = ""
    box = re.search(r'viewBox="([-\d.]+) ([-\d.]+) ([-\d.]+) ([-\d.]+)"', tag)
    if caption and box:
        x, y, w, h = (float(v) for v in box.groups())
        line_h = max(14.0, h / 25)
        tag = tag.replace(box.group(0), f'viewBox="{x:g} {y:g} {w:g} {h + line_h:g}"')
        height = re.search(r'height="([\d.]+)(\w*)"', tag)
        if height:
            grown = float(height.group(1)) * (h + line_h) / h
            tag = tag.replace(height.group(0), f'height="{grown:g}{height.group(2)}"')
        extra = (f'<text x="{x + 4:g}" y="{y + h + line_h * 0.72:g}" font-size="{line_h * 0.6:g}" '
                 f'fill="#333333" font-family="sans-serif">{escape(caption)}</text>')
    end = text.rfind("</svg>")
    body = text[:root.start()] + tag + meta + text[root.end():end] + extra + text[end:]
    return body.encode("utf-8")
