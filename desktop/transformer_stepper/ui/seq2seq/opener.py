"""The main window's way to an encoder–decoder: File → Open, a drop, the recent list, the HF
cache or File → Built-in Translator hand a T5/BART/Marian folder here, and it opens in its own
TranslationWindow; the main window keeps its model, text and stage. The choice reads only the
folder's config.json (io/seq2seq_loader.is_seq2seq_path), so the GUI thread does not block."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from shiboken6 import isValid

from ...io.seq2seq_loader import is_seq2seq_path
from .window import TranslationWindow


class TranslationWindows:
    """The encoder–decoder windows opened from one main window (closed with it)."""

    def __init__(self) -> None:
        self.windows: list[TranslationWindow] = []

    @staticmethod
    def wants(path: Optional[str]) -> bool:
        return path is not None and is_seq2seq_path(path)

    def latest(self) -> Optional[TranslationWindow]:
        """The last window opened that is still open with a model, or None."""
        open_ = [w for w in self.windows if isValid(w) and w.isVisible() and w.model is not None]
        return open_[-1] if open_ else None

    def open(self, path: str, source: str = "") -> TranslationWindow:
        self.windows = [w for w in self.windows if isValid(w) and w.isVisible()]
        window = TranslationWindow(source or example_source(path))
        window.open_model(path)
        window.show()
        self.windows.append(window)
        return window

    def show_translating(self, path: str, source: str) -> TranslationWindow:
        """A walk's step: the window on `path` (the one already open, if it is), translating
        `source` from the start token."""
        for window in self.windows:
            if isValid(window) and window.isVisible() and window.path == path and window.model is not None:
                window.source_box.setText(source)
                window.target_box.setText("")
                window.retrace_then_translate()
                window.raise_()
                return window
        window = TranslationWindow(source)
        window.translate_when_open = True
        window.open_model(path)
        window.show()
        self.windows = [w for w in self.windows if isValid(w) and w.isVisible()] + [window]
        return window

    def close_all(self) -> None:
        for window in self.windows:
            if isValid(window):
                window.close()
        self.windows.clear()


def example_source(path: str) -> str:
    """The folder's own example sentence (config.json "example_source", as the built-in
    translator has), else empty (the window then traces its default)."""
    import json

    folder = Path(path)
    folder = folder if folder.is_dir() else folder.parent
    try:
        value = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("example_source", "")
    except (OSError, ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""
