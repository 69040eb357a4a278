"""The desktop app (PySide6 + pyqtgraph). Only this package imports Qt."""
