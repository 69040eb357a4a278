"""What the user last chose for exports (folder, scale, background, format), kept in the
window's QSettings when there is one (so tests, with their own settings file, stay isolated),
else for the session only."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QWidget

from ...io.export_formats import DEFAULT_FIGURE_FORMAT

_memory: dict[str, Any] = {}
DEFAULTS = {"folder": str(Path.home()), "scale": 2, "dark": False, "format": DEFAULT_FIGURE_FORMAT,
            "all_layers_heads": False, "caption": False}


def _settings(widget: QWidget):
    window = widget.window() if widget is not None else None
    return getattr(window, "settings", None)


def get(widget: QWidget, key: str):
    settings = _settings(widget)
    default = DEFAULTS[key]
    if settings is None:
        return _memory.get(key, default)
    value = settings.value(f"export/{key}", default)
    if isinstance(default, bool):         # QSettings (ini) hands back "true"/"false"
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if isinstance(default, int):
        try:
            return int(value)
        except (TypeError, ValueError):
            return default
    return str(value)


def put(widget: QWidget, key: str, value) -> None:
    settings = _settings(widget)
    if settings is None:
        _memory[key] = value
    else:
        settings.setValue(f"export/{key}", value)


def folder(widget: QWidget) -> Path:
    path = Path(get(widget, "folder"))
    return path if path.is_dir() else Path.home()


def set_folder(widget: QWidget, path: Path) -> None:
    put(widget, "folder", str(path))


def scale(widget: QWidget) -> int:
    value = get(widget, "scale")
    return value if value in (1, 2, 4) else DEFAULTS["scale"]


def dark(widget: QWidget) -> bool:
    return bool(get(widget, "dark"))


def caption(widget: QWidget) -> bool:
    """A line under each exported figure saying where it came from (off unless asked for)."""
    return bool(get(widget, "caption"))
