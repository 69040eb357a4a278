"""The window on the screen it opens on: the size the app prefers (1400 x 860) or the user's own
size from last time, each kept within the screen's available area (the panels and the
taskbar left out), with the window manager's frame counted."""
from __future__ import annotations

from PySide6.QtCore import QRect, QSize

PREFERRED = QSize(1400, 860)
FRAME_ALLOWANCE = QSize(8, 40)      # a title bar and borders, before the window manager says


def fitted_size(wanted: QSize, available: QSize, frame: QSize = FRAME_ALLOWANCE) -> QSize:
    """`wanted` (the client area) shrunk so that it, with `frame` around it, fits `available`."""
    return QSize(max(1, min(wanted.width(), available.width() - frame.width())),
                 max(1, min(wanted.height(), available.height() - frame.height())))


def fitted_position(frame: QRect, available: QRect) -> tuple[int, int]:
    """The top-left corner that keeps a frame of this size inside `available` (moved as little
    as possible)."""
    x = min(max(frame.x(), available.x()), available.right() + 1 - frame.width())
    y = min(max(frame.y(), available.y()), available.bottom() + 1 - frame.height())
    return max(x, available.x()), max(y, available.y())


def fit_window(window) -> None:
    """Shrink and move a shown window whose frame runs off its screen's available area."""
    screen = window.screen()
    if screen is None or window.isMaximized() or window.isFullScreen():
        return
    available = screen.availableGeometry()
    frame, inner = window.frameGeometry(), window.geometry()
    border = QSize(frame.width() - inner.width(), frame.height() - inner.height())
    if border.isNull() and window.windowHandle() is not None and _decorated():
        border = FRAME_ALLOWANCE                  # the window manager has not framed it yet
    size = fitted_size(inner.size(), available.size(), border)
    if size != inner.size():
        window.resize(size)
        frame = window.frameGeometry()
    x, y = fitted_position(QRect(frame.topLeft(), size + border), available)
    if (x, y) != (frame.x(), frame.y()):
        window.move(x, y)


def _decorated() -> bool:
    """Windows get a frame from a window manager here (not on the offscreen platform)."""
    from PySide6.QtGui import QGuiApplication

    return QGuiApplication.platformName() not in ("offscreen", "minimal")


def fit_new_window(window, wanted: QSize) -> None:
    """Size a window about to be shown: `wanted`, within its screen with room for a frame."""
    screen = window.screen()
    window.resize(wanted if screen is None else fitted_size(wanted, screen.availableGeometry().size()))
