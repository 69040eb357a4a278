"""Exporting the Compare figures: right-click → Export as PNG… / SVG… on each (the entries every
plot has, rendered by ui/export), and every figure into a folder for the headless command."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from PySide6.QtGui import QAction

from ...io.array_export import write_bytes
from ...io.export_formats import FIGURE_FORMATS
from ..export import menu
from ..export.render import ExportOptions, encode, render
from .bundle import CompareFigures, file_name


def install_menu(view, number: int, name: str, figure, where: Callable[[], tuple[int, int]]) -> None:
    """Give `figure` the two export entries; `where()` is the (layer, head) shown now."""
    scene = figure.scene()
    actions = []
    for entry in FIGURE_FORMATS:
        action = QAction(entry.menu_text, scene)
        action.triggered.connect(
            lambda _=False, f=entry.name: export_dialog(view, number, name, figure, f, *where()))
        actions.append(action)
    scene.contextMenu = actions


def export_dialog(view, number: int, name: str, figure, file_format: str, layer: int,
                  head: int) -> Optional[Path]:
    """Ask where, then export the figure as shown. -> the file written, or None."""
    return menu.ask_and_export(view, name, figure.figure, file_format,
                               file_name(number, name, layer, head, file_format),
                               title=f"Compare {number}: {figure.title}")


def write_figures(figures: CompareFigures, folder: Path, options: ExportOptions, layer: int,
                  head: int, description: str = "", on_written=None) -> list[Path]:
    """Render every figure that applies and write it into `folder` (GUI thread; headless use).
    -> the files written. ModelError (from the writer) names a file that could not be written."""
    written = []
    for number, name, figure in figures.plots():
        path = Path(folder) / file_name(number, name, layer, head, options.format)
        replaced = write_bytes(path, encode(render(figure.figure, options,
                                                   f"Compare {number}: {figure.title}", description)))
        written.append(path)
        if on_written is not None:
            on_written(path, replaced)
    return written
