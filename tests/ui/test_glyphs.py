"""Every non-ASCII character the app writes — in its code (labels, captions, messages) and in its
content (explanations, walks) — is in DejaVu Sans, the sans-serif font every Debian and Ubuntu
desktop has: "ⓘ" (U+24D8) was in no installed font there and drew as a box."""
from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from PySide6.QtGui import QFont, QFontInfo, QFontMetrics

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("desktop/transformer_stepper/**/*.py", "resources/explanations/*.md", "resources/walks/*.json")


def app_glyphs() -> dict[str, list[str]]:
    """Each non-ASCII character of the app's code and content -> the files it is in."""
    found: dict[str, list[str]] = {}
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            for char in sorted(set(path.read_text(encoding="utf-8"))):
                if ord(char) > 127 and unicodedata.category(char)[0] not in "CZ":   # not spaces, controls
                    found.setdefault(char, []).append(str(path.relative_to(ROOT)))
    return found


def test_the_app_writes_only_glyphs_dejavu_sans_has(qapp):
    font = QFont("DejaVu Sans")
    if QFontInfo(font).family() != "DejaVu Sans":
        pytest.skip("DejaVu Sans is not installed here")
    metrics = QFontMetrics(font)
    glyphs = app_glyphs()
    assert len(glyphs) > 20 and "⚠" in glyphs            # the list is real: the warning sign is in it
    missing = {f"{char} U+{ord(char):04X} {unicodedata.name(char, '?')}": files[:3]
               for char, files in glyphs.items() if not metrics.inFontUcs4(ord(char))}
    assert missing == {}
