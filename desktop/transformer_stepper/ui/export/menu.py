"""Right-click on any plot: Export as PNG… / Export as SVG….

They replace pyqtgraph's own "Export..." entry, whose dialog offers pyqtgraph's SVGExporter,
which fails on PySide6 >= 6.11 (pyqtgraph issue #3485). The figure is exported as it is on
screen (size, selection, temperature), at the last chosen scale and background.

The file dialogs are module-level functions so tests can answer them."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from ...core.model.errors import ModelError
from ...io.array_export import write_bytes
from ...io.export_formats import FIGURE_FORMATS, figure_format
from . import metadata, preferences
from .render import ExportOptions, encode, plot_file_name, render


def ask_save_path(parent: QWidget, caption: str, start: str, file_filter: str) -> str:
    """The path to save to ('' if cancelled); the dialog asks before replacing a file."""
    path, _ = QFileDialog.getSaveFileName(parent, caption, start, file_filter)
    return path


def warn(parent: QWidget, title: str, message: str) -> QMessageBox:
    """A non-blocking warning naming the problem; the window's error list (if it keeps one)
    and status bar record it too."""
    window = parent.window() if parent is not None else None
    errors = getattr(window, "errors", None)
    if isinstance(errors, list):
        errors.append(message)
    status = getattr(window, "statusBar", None)
    if callable(status):
        status().showMessage(f"{title}: {message}", 15000)
    box = QMessageBox(QMessageBox.Icon.Warning, title, message, QMessageBox.StandardButton.Ok, window)
    box.open()
    return box


def install_plot_menus(view) -> None:
    """Every figure of a stage view gets the two entries (the window's views; a view drawn
    only to be exported needs none)."""
    for name, figure in view.figures():
        install_plot_menu(view, name, figure)
    view.on_new_figure = install_plot_menu       # and those it makes later


def install_plot_menu(view, name: str, figure) -> None:
    """Give `figure` (a Figure widget of `view`, exported under `name`) the two entries."""
    scene = figure.scene()
    actions = []
    for entry in FIGURE_FORMATS:
        action = QAction(entry.menu_text, scene)
        action.triggered.connect(lambda _=False, f=entry.name: export_plot_dialog(view, name, figure, f))
        actions.append(action)
    scene.contextMenu = actions


def export_plot_dialog(view, name: str, figure, file_format: str) -> Optional[Path]:
    """Ask where, then export the figure as shown. -> the file written, or None."""
    figure.finish()                      # whole: its colour bar, if the window has not made it yet
    session, stage = view.session, view.stage
    config = session.model.config if session.model else None
    default = plot_file_name(stage, name, session.layer, session.head, file_format, config)
    return ask_and_export(view, name, figure.figure, file_format, default,
                          title=f"{stage.number_for(config)}. {stage.title}: {name}")


def ask_and_export(view, name: str, item, file_format: str, default_name: str,
                   title: str) -> Optional[Path]:
    """Ask where (starting at the last export folder, with `default_name`), then export `item`
    with the user's scale and background. -> the file written, or None."""
    folder = preferences.folder(view)
    entry = figure_format(file_format)
    chosen = ask_save_path(view, f"Export “{name}” as {file_format.upper()}", str(folder / default_name),
                           entry.file_filter)
    if not chosen:
        return None
    path = Path(chosen)
    if path.suffix.lower() != entry.extension:
        path = path.with_name(path.name + entry.extension)
    preferences.set_folder(view, path.parent)
    options = ExportOptions(format=file_format, scale=preferences.scale(view),
                            dark=preferences.dark(view), size=None)
    return export_plot(view, item, path, options, title=title)


def export_plot(parent: QWidget, item, path: Path, options: ExportOptions, title: str = "") -> Optional[Path]:
    """Render and write one figure now (tens of milliseconds); a failure is a warning."""
    try:
        rendered = render(item, options, title)
        facts = _facts(parent)
        caption = metadata.caption_line(facts) if facts and preferences.caption(parent) else None
        write_bytes(path, encode(rendered, facts, caption))
    except ModelError as exc:
        warn(parent, "Could not export the plot", str(exc))
        return None
    window = parent.window()
    if callable(getattr(window, "statusBar", None)):
        window.statusBar().showMessage(f"Exported {path}", 8000)
    return path


def _facts(view) -> Optional[dict]:
    """The figure's facts (metadata.py) when it is a stage view's plot, else None."""
    session, key = getattr(view, "session", None), getattr(view, "stage_key", "")
    trace = getattr(session, "shown_trace", None)
    if trace is None or not key:
        return None
    return metadata.figure_facts(session.model, trace, key, session.layer, session.head,
                                 session.selected_token)
