"""File-menu parts for choosing a model: recent models (kept in QSettings) and the models found
in the Hugging Face cache."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMenu, QWidget

from ...io.hf_cache import hub_cache_dir, list_cached_models
from ...io.gguf.local_stores import list_local_models, ollama_models_dir

MAX_RECENT = 10


class RecentModels:
    def __init__(self, settings: QSettings) -> None:
        self.settings = settings

    def paths(self) -> list[str]:
        value = self.settings.value("recent_models", [])
        if isinstance(value, str):          # QSettings returns a lone entry as a string
            value = [value]
        return [str(v) for v in (value or [])]

    def add(self, path: str) -> None:
        paths = [path] + [p for p in self.paths() if p != path]
        self.settings.setValue("recent_models", paths[:MAX_RECENT])

    def clear(self) -> None:
        self.settings.setValue("recent_models", [])

    def forget_missing(self) -> list[str]:
        """Drop the models that are gone (a training snapshot lives in a temporary folder
        deleted when the app quits; a folder moved or deleted); the paths left."""
        paths = self.paths()
        kept = [p for p in paths if Path(p).exists()]
        if kept != paths:
            self.settings.setValue("recent_models", kept)
        return kept


class RecentMenu(QMenu):
    def __init__(self, recent: RecentModels, open_path: Callable[[str], None],
                 parent: Optional[QWidget] = None) -> None:
        super().__init__("Recent Models", parent)
        self.recent, self.open_path = recent, open_path
        self.aboutToShow.connect(self.refresh)

    def refresh(self) -> None:
        self.clear()
        paths = self.recent.forget_missing()
        if not paths:
            self.addAction("(none yet)").setEnabled(False)
            return
        for path in paths:
            action = self.addAction(_short(path))
            action.setToolTip(path)
            action.setStatusTip(path)
            action.triggered.connect(lambda _=False, p=path: self.open_path(p))
        self.addSeparator()
        self.addAction("Clear Recent Models").triggered.connect(self.recent.clear)


class HFCacheMenu(QMenu):
    """Lists the cache when opened (it may have changed since the app started)."""

    def __init__(self, open_path: Callable[[str], None], parent: Optional[QWidget] = None) -> None:
        super().__init__("Hugging Face Cache", parent)
        self.open_path = open_path
        self.aboutToShow.connect(self.refresh)

    def refresh(self) -> None:
        self.clear()
        models = list_cached_models()
        if not models:
            self.addAction(f"(no models in {hub_cache_dir()})").setEnabled(False)
            return
        for cached in models:
            action = self.addAction(f"{cached.repo_id}   ({cached.revision[:8]})")
            action.setStatusTip(str(cached.path))
            action.triggered.connect(lambda _=False, p=str(cached.path): self.open_path(p))


class LocalModelsMenu(QMenu):
    """GGUF models Ollama and LM Studio downloaded, listed when opened."""

    def __init__(self, open_path: Callable[[str], None], parent: Optional[QWidget] = None) -> None:
        super().__init__("Local Models (Ollama, LM Studio)", parent)
        self.open_path = open_path
        self.aboutToShow.connect(self.refresh)

    def refresh(self) -> None:
        self.clear()
        models = list_local_models()
        if not models:
            self.addAction(f"(none in {ollama_models_dir()} or LM Studio's folders)").setEnabled(False)
            return
        for local in models:
            action = self.addAction(f"{local.name}   ({local.source})")
            action.setStatusTip(str(local.path))
            action.triggered.connect(lambda _=False, p=str(local.path): self.open_path(p))


def _short(path: str) -> str:
    """The last three parts of a long path after "…/" (never a bare relative-looking path)."""
    parts = Path(path).parts
    return "…/" + "/".join(parts[-3:]) if len(parts) > 4 else path


def add_compare_actions(window, menu: QMenu) -> None:
    """File → Compare With Model…, and a menu of the same lists to pick the second model from
    (Recent, the Hugging Face cache, Ollama / LM Studio); they open it in the Two Models tab."""
    def choose() -> None:
        from PySide6.QtWidgets import QFileDialog

        path, _ = QFileDialog.getOpenFileName(window, "Compare with a model file (or pick a folder's "
                                              "config.json)", window._dialog_start(),
                                              "Model files (*.safetensors *.gguf *.npz *.json);;All files (*)")
        if path:
            window.compare_with(path)

    action = menu.addAction("Co&mpare With Model…", choose)
    action.setToolTip("Open a second model of the same shape and tokenizer against this one "
                      "(F16 against Q4_K_M, base against fine-tuned); Shift-drop a file does the same")
    other = QMenu("Compare With", menu)
    other.addMenu(RecentMenu(window.recent, window.compare_with, other))
    other.addMenu(HFCacheMenu(window.compare_with, other))
    other.addMenu(LocalModelsMenu(window.compare_with, other))
    menu.addMenu(other)
