"""Render resources/icons/transformer-stepper.svg to the PNG sizes desktops ask for.

    python tests/make_icons.py        (needs only PySide6; run after editing the SVG)"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ICONS = Path(__file__).resolve().parents[1] / "resources" / "icons"
SIZES = (16, 32, 48, 64, 128, 256)


def main() -> int:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv)  # noqa: F841 (keeps Qt alive)
    renderer = QSvgRenderer(str(ICONS / "transformer-stepper.svg"))
    if not renderer.isValid():
        print("error: the icon SVG does not parse", file=sys.stderr)
        return 2
    for size in SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        renderer.render(painter)
        painter.end()
        image.save(str(ICONS / f"transformer-stepper-{size}.png"))
    print(f"wrote {len(SIZES)} PNGs to {ICONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
