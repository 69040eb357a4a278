"""Launching the app: `transformer-stepper [--model PATH] [--text TEXT]` lands in run()."""
from __future__ import annotations

import sys
from typing import Optional

from PySide6.QtCore import QSettings
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication
from .collector import GuiThreadCollector

from ..io.resources import resources_dir
from ..runtime import tune_process
from .main_window import MainWindow
from .plots import configure_pyqtgraph
from .session import Session


def app_icon() -> QIcon:
    icon = QIcon()
    icons = resources_dir() / "icons"
    for path in sorted(icons.glob("transformer-stepper-*.png")):
        icon.addFile(str(path))
    return icon


def application() -> QApplication:
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Transformer Stepper")
    app.setOrganizationName("transformer-stepper")
    app.setDesktopFileName("transformer-stepper")   # Wayland/X11 match the launcher entry
    app.setWindowIcon(app_icon())
    configure_pyqtgraph()
    tune_process(app=True)   # one BLAS thread, a short GIL switch interval: see runtime.py
    if not hasattr(app, "garbage_collector"):
        # Python's cyclic collector could otherwise run in a worker thread, or in the middle of
        # a Qt call that holds a lock, and destroy Qt objects there (a crash or a deadlock): it
        # runs on a timer on the GUI thread instead (pyqtgraph's recipe)
        app.garbage_collector = GuiThreadCollector(interval=1.0)
    return app


def create_main_window(model_path: Optional[str] = None, text: Optional[str] = None,
                       settings: Optional[QSettings] = None) -> MainWindow:
    """The window with its session; the model (None: the built-in one) opens in a worker, so
    the window can show at once. A model that fails to open leaves an error dialog and an
    empty window from which File → Open works."""
    session = Session()
    if text:
        session.set_text(text, immediate=True)     # no model yet: nothing runs until it opens
    window = MainWindow(session, settings)
    session.setParent(window)
    window.open_model(model_path)
    return window


def run(model_path: Optional[str] = None, text: Optional[str] = None,
        session_file: Optional[str] = None) -> int:
    app = application()
    from ..io.seq2seq_loader import is_seq2seq_path

    if model_path and is_seq2seq_path(model_path):      # T5, BART, Marian: their own window
        from .seq2seq.window import TranslationWindow

        window = TranslationWindow(text or "")
        window.open_model(model_path)
        window.show()
        return app.exec()
    window = create_main_window(model_path, text)
    window.show()
    if session_file:
        from .menus.session_file import open_session

        window.session_opener = open_session(window, session_file)
    return app.exec()
