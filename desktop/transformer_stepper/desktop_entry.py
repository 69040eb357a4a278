"""The launcher entry: a freedesktop .desktop file and the icon, written into the user's
data folder ($XDG_DATA_HOME, default ~/.local/share), so the app appears in the desktop's
launcher; and removed again."""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from .core.model.errors import ModelError
from .io.resources import resources_dir

APP_ID = "transformer-stepper"
ICON_SIZES = (16, 32, 48, 64, 128, 256)


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def _entry_path() -> Path:
    return data_home() / "applications" / f"{APP_ID}.desktop"


def _icon_paths() -> list[tuple[Path, Path]]:
    icons, target = resources_dir() / "icons", data_home() / "icons" / "hicolor"
    pairs = [(icons / f"{APP_ID}-{size}.png", target / f"{size}x{size}" / "apps" / f"{APP_ID}.png")
             for size in ICON_SIZES]
    pairs.append((icons / f"{APP_ID}.svg", target / "scalable" / "apps" / f"{APP_ID}.svg"))
    return pairs


def _launcher_command() -> str:
    # the console script beside this interpreter (a venv or pipx), else `python -m`
    script = Path(sys.executable).with_name(APP_ID)
    if script.is_file():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m transformer_stepper"


def install() -> list[Path]:
    """-> the files written."""
    written = []
    try:
        for source, target in _icon_paths():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            written.append(target)
        entry = _entry_path()
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text("\n".join([
            "[Desktop Entry]", "Type=Application", "Name=Transformer Stepper",
            "GenericName=Transformer visualiser",
            "Comment=Step through what a transformer computes, with exact values",
            f"Exec={_launcher_command()} --model %f", f"TryExec={_launcher_command().split()[0]}",
            f"Icon={APP_ID}", "Terminal=false", "Categories=Education;Science;Development;",
            "Keywords=transformer;attention;embedding;neural;", "StartupWMClass=transformer-stepper", ""]),
            encoding="utf-8")
        written.append(entry)
    except OSError as exc:
        raise ModelError(f"{exc.filename or data_home()}: cannot write the desktop entry "
                         f"({exc.strerror or exc})") from None
    return written


def uninstall() -> list[Path]:
    """-> the files removed (none if nothing was installed)."""
    removed = []
    for path in [_entry_path(), *(target for _, target in _icon_paths())]:
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ModelError(f"{path}: cannot remove ({exc.strerror or exc})") from None
    return removed
