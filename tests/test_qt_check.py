"""The launcher before Qt starts: on X11 without libxcb-cursor0 it prints the one-line fix and
exits with status 2 (Qt 6.5+ would abort with a page about the xcb plugin)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from transformer_stepper.cli.qt_check import FIX, uses_xcb, xcb_cursor_problem

ROOT = Path(__file__).resolve().parents[1]


def test_x11_without_the_library_is_named_with_its_fix():
    x11 = {"DISPLAY": ":0"}
    assert FIX in xcb_cursor_problem(x11, "linux", lambda name: None)
    assert xcb_cursor_problem(x11, "linux", lambda name: "libxcb-cursor.so.0") == ""
    assert xcb_cursor_problem({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, "linux", lambda n: None) == ""
    assert xcb_cursor_problem(x11, "darwin", lambda name: None) == ""
    assert not uses_xcb({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}, "linux")
    assert uses_xcb({"WAYLAND_DISPLAY": "wayland-0", "QT_QPA_PLATFORM": "xcb"}, "linux")
    assert not uses_xcb({}, "linux")                    # no display: Qt says so itself


def test_the_launcher_exits_with_status_2_and_one_line(tmp_path):
    # a find_library that finds nothing, as on a desktop without the package
    script = ("import ctypes.util, sys; ctypes.util.find_library = lambda name: None; "
              "from transformer_stepper.cli import main; sys.exit(main([]))")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DISPLAY": ":0",
           "PYTHONPATH": str(ROOT / "desktop")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and FIX in lines[0]
