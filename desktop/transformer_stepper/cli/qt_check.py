"""Before Qt starts: on an X11 desktop, Qt 6.5 and later need libxcb-cursor0, which a plain
Debian/Ubuntu desktop may not have; without it Qt aborts with a long message about the "xcb"
platform plugin. The launcher says the one-line fix instead and exits with status 2."""
from __future__ import annotations

import ctypes.util
import sys
from typing import Callable, Mapping, Optional

FIX = "sudo apt-get install libxcb-cursor0"


def uses_xcb(environ: Mapping[str, str], platform: str = sys.platform) -> bool:
    """Qt would take its X11 ("xcb") platform plugin here."""
    if not platform.startswith("linux"):
        return False
    chosen = environ.get("QT_QPA_PLATFORM", "").split(":")[0].split(";")[0].strip()
    if chosen:
        return chosen == "xcb"
    if environ.get("WAYLAND_DISPLAY") and environ.get("XDG_SESSION_TYPE") == "wayland":
        return False                             # Qt 6 takes Wayland on a Wayland session
    return bool(environ.get("DISPLAY"))


def xcb_cursor_problem(environ: Mapping[str, str], platform: str = sys.platform,
                       find_library: Callable[[str], Optional[str]] = ctypes.util.find_library) -> str:
    """The one-line message when Qt would start on X11 without libxcb-cursor; "" otherwise."""
    if not uses_xcb(environ, platform) or find_library("xcb-cursor"):
        return ""
    return (f"transformer-stepper: Qt needs libxcb-cursor0 to open a window on X11, and it is not "
            f"installed: {FIX}")
