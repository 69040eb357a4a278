"""The QApplication for drawing without a window: the export and compare commands, benchmarks."""
from __future__ import annotations

import os
import sys


def ensure_application():
    """The QApplication, created if there is none. On Linux it uses the offscreen platform
    unless QT_QPA_PLATFORM says otherwise: nothing is shown, no display is needed, and the
    output does not depend on the screen's DPI."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        if sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        app = QApplication([sys.argv[0] if sys.argv else "transformer-stepper"])
    from .plots import configure_pyqtgraph

    configure_pyqtgraph()
    if not hasattr(app, "garbage_collector"):
        # as the window does (ui/app.py): cyclic garbage is collected on this thread, on a
        # timer, never in a worker (pyqtgraph leaves QPixmaps in reference cycles, and one
        # destroyed in a worker deadlocks or crashes); an export no longer turns the GC off
        from .collector import GuiThreadCollector

        app.garbage_collector = GuiThreadCollector(interval=1.0)
    return app
