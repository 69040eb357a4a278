"""Words written in heatmap cells: ink that reads on the cell's colour, and text cut to the
cell's width (never into the next cell)."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF

BLACK, WHITE = "#000000", "#ffffff"
PADDING = 4.0                # pixels kept free between a word and its cell's edges


def relative_luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG 2 relative luminance of sRGB colours in 0 … 1, shape [..., 3] -> [...]."""
    rgb = np.asarray(rgb, dtype=np.float64)[..., :3]
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def contrast(luminance_a, luminance_b) -> np.ndarray:
    """WCAG contrast ratio, 1 … 21."""
    high, low = np.maximum(luminance_a, luminance_b), np.minimum(luminance_a, luminance_b)
    return (high + 0.05) / (low + 0.05)


def inks(rgb: np.ndarray) -> np.ndarray:
    """Black or white, whichever contrasts more with each cell colour [..., 3] (0 … 1)."""
    luminance = relative_luminance(rgb)
    white_wins = contrast(1.0, luminance) > contrast(0.0, luminance)
    return np.where(white_wins, WHITE, BLACK)


def elide(text: str, metrics: QFontMetricsF, pixels: float, max_chars: int = 12) -> str:
    """`text` cut to at most `max_chars` characters and `pixels` wide, '…' marking the cut;
    '' when not even one character and the '…' fit (a bare '…' says nothing)."""
    if len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    room = pixels - PADDING
    if metrics.horizontalAdvance(text) <= room:
        return text
    shown = metrics.elidedText(text, Qt.TextElideMode.ElideRight, room)
    return shown if len(shown) >= 2 and shown != "…" else ""
