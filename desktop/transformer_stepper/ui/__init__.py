"""The desktop app (PySide6 + pyqtgraph). Only this package imports Qt."""
from . import _pyside_workaround  # noqa: F401  (before any Qt call: see the module)
