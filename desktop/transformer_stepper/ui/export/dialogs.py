"""File → Export Current Stage…, Export All Stages…, Export Trace Data….

Each asks with a small dialog (folder, format, size, background, layers and heads), asks once
before replacing files of an earlier export, then runs without blocking the window: figures
through an ExportJob with a cancellable progress dialog, arrays in a worker. Failures are a
warning naming the file; the app, the model and the text are untouched.

The dialogs open with open() (not exec()), so tests fill them in and accept them."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QComboBox, QDialog, QDialogButtonBox,
                               QFileDialog, QFormLayout, QHBoxLayout, QLineEdit, QMessageBox,
                               QProgressDialog, QPushButton, QRadioButton, QVBoxLayout, QWidget)
from shiboken6 import isValid

from ...core.model import stages
from ...core.model.errors import ModelError
from ...io.array_export import DATA_FORMATS, data_files, prepare_folder, write_data_files
from ...state.export_run import LANE
from ...state.scheduler import Job
from ..workers import WorkerPool
from . import preferences
from .job import ExportJob, existing_exports
from .menu import warn
from ...io.export_formats import DEFAULT_FIGURE_FORMAT
from .render import DEFAULT_SIZE, FORMATS, SCALES, ExportOptions
from .snapshot import SnapshotSession
from .waiting import when_shown_ready

_running: set = set()          # jobs in progress (kept alive until they end)


def ask_folder(parent: QWidget, caption: str, start: str) -> str:
    return QFileDialog.getExistingDirectory(parent, caption, start)


def ask_replace(parent: QWidget, folder: Path, names: list[str]) -> bool:
    """Whether to replace files of an earlier export (blocking question, like a file dialog)."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    answer = QMessageBox.question(
        parent, "Replace files?",
        f"{folder} already holds {len(names)} file(s) this export may replace ({shown}).",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Yes


# -- the menu entries -------------------------------------------------------------------------
def add_export_actions(window, menu) -> list:
    """Append the three entries to `menu`; they are enabled while there is a trace."""
    menu.addSeparator()

    def figures(all_stages: bool) -> None:
        view = _tab_view(window)
        if view is not None:                 # another tab: its own figures, all of them
            view.export_figures_dialog()
        else:
            open_figures_dialog(window, all_stages=all_stages)

    actions = [
        menu.addAction("Export Current &Stage…", lambda: figures(False)),
        menu.addAction("Export &All Stages…", lambda: figures(True)),
        menu.addAction("Export &Trace Data…", lambda: open_data_dialog(window)),
    ]

    def update() -> None:
        view = _tab_view(window)
        actions[0].setText("Export &Figures of This Tab…" if view is not None
                           else "Export Current &Stage…")
        actions[1].setVisible(view is None)
        for action in actions:
            action.setEnabled(window.session.trace is not None)
    window.session.traceChanged.connect(update)
    tabs = getattr(window, "tabs", None)
    if tabs is not None:
        tabs.currentChanged.connect(lambda _: update())
    update()
    return actions


def _tab_view(window):
    """The current tab's view when it is not the stepper and exports figures of its own."""
    tabs = getattr(window, "tabs", None)
    if tabs is None or tabs.current_key() in ("", "stepper"):
        return None
    view = tabs.views.get(tabs.current_key())
    return view if hasattr(view, "export_figures_dialog") else None


def _no_trace(window) -> bool:
    if window.session.trace is None:
        warn(window, "Nothing to export", "open a model and type a sentence first")
        return True
    return False


# -- figures ----------------------------------------------------------------------------------
class FolderRow(QWidget):
    def __init__(self, start: Path, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.edit = QLineEdit(str(start))
        self.edit.setMinimumWidth(320)
        choose = QPushButton("Choose…")
        choose.clicked.connect(self._choose)
        row.addWidget(self.edit, 1)
        row.addWidget(choose)

    def _choose(self) -> None:
        chosen = ask_folder(self, "Export into which folder?", self.edit.text())
        if chosen:
            self.edit.setText(chosen)

    def path(self) -> Path:
        return Path(self.edit.text().strip()).expanduser()


class ExportFiguresDialog(QDialog):
    def __init__(self, window, all_stages: bool) -> None:
        super().__init__(window)
        session = window.session
        stage = stages.stage(session.stage_key)
        self.setWindowTitle("Export all stages" if all_stages else f"Export stage {stage.number}")
        form = QFormLayout(self)
        self.folder = FolderRow(preferences.folder(window))
        form.addRow("Folder:", self.folder)
        self.this_stage = QRadioButton(f"This stage ({stage.number}. {stage.title})")
        self.every_stage = QRadioButton("Every stage, one file per plot")
        group = QButtonGroup(self)
        for button in (self.this_stage, self.every_stage):
            group.addButton(button)
        (self.every_stage if all_stages else self.this_stage).setChecked(True)
        which = QVBoxLayout()
        which.addWidget(self.this_stage)
        which.addWidget(self.every_stage)
        form.addRow("Plots:", which)
        self.all_layers_heads = QCheckBox(f"Every layer and head (else layer {session.layer}, head {session.head})")
        self.all_layers_heads.setChecked(preferences.get(window, "all_layers_heads"))
        form.addRow("Layers:", self.all_layers_heads)
        self.format = QComboBox()
        self.format.addItems([f.upper() for f in FORMATS])
        self.format.setCurrentIndex(FORMATS.index(preferences.get(window, "format")
                                                  if preferences.get(window, "format") in FORMATS
                                                  else DEFAULT_FIGURE_FORMAT))
        form.addRow("Format:", self.format)
        self.scale = QComboBox()
        width, height = DEFAULT_SIZE
        for s in SCALES:
            self.scale.addItem(f"{s}×  ({width * s} × {height * s} px)", s)
        self.scale.setCurrentIndex(SCALES.index(preferences.scale(window)))
        form.addRow("Size:", self.scale)
        self.background = QComboBox()
        self.background.addItems(["Light", "Dark"])
        self.background.setCurrentIndex(1 if preferences.dark(window) else 0)
        form.addRow("Background:", self.background)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Export")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def options(self) -> ExportOptions:
        return ExportOptions(format=FORMATS[self.format.currentIndex()], scale=float(self.scale.currentData()),
                             dark=self.background.currentIndex() == 1)

    def stage_keys(self, window) -> list[str]:
        if self.every_stage.isChecked():
            return [s.key for s in stages.STAGES]
        return [window.session.stage_key]


def open_figures_dialog(window, all_stages: bool) -> Optional[ExportFiguresDialog]:
    if _no_trace(window):
        return None
    dialog = ExportFiguresDialog(window, all_stages)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.accepted.connect(lambda: start_figures_export(window, dialog))
    dialog.open()
    return dialog


def start_figures_export(window, dialog: ExportFiguresDialog) -> Optional[ExportJob]:
    options, keys = dialog.options(), dialog.stage_keys(window)
    all_layers_heads = dialog.all_layers_heads.isChecked()
    for key, value in (("format", options.format), ("scale", int(options.scale)), ("dark", options.dark),
                       ("all_layers_heads", all_layers_heads)):
        preferences.put(window, key, value)
    if _no_trace(window):
        return None
    try:
        folder = prepare_folder(dialog.folder.path())
    except ModelError as exc:
        warn(window, "Could not export", str(exc))
        return None
    preferences.set_folder(window, folder)
    existing = existing_exports(folder, keys, options.format,
                                window.session.model.config if window.session.model else None)
    if existing and not ask_replace(window, folder, [p.name for p in existing]):
        return None
    return when_shown_ready(window, lambda: _export_figures(window, folder, keys, options, all_layers_heads),
                            "the figures")


def _export_figures(window, folder: Path, keys: list[str], options: ExportOptions,
                    all_layers_heads: bool) -> Optional[ExportJob]:
    if _no_trace(window):
        return None
    snapshot = SnapshotSession.of(window.session, parent=window)
    job = ExportJob(snapshot, folder, keys, options, all_layers_heads, parent=window,
                    workers=window.session.workers)
    job.caption = preferences.caption(window)
    progress = QProgressDialog("Exporting…", "Cancel", 0, max(job.total, 1), window)
    progress.setWindowTitle("Export")
    progress.setWindowModality(Qt.WindowModality.WindowModal)
    progress.setMinimumDuration(300)
    progress.setAutoClose(False)
    progress.setAutoReset(False)
    job.progress_dialog = progress
    def progressed(done: int, total: int, name: str) -> None:
        # a modal dialog's setValue runs the event loop: the job may end (and this dialog go)
        # in there, so each call checks the dialog is still alive
        if isValid(progress):
            progress.setValue(done)
        if isValid(progress) and job.state == "running":
            progress.setLabelText(f"Exporting {name}…")

    job.progressed.connect(progressed)
    progress.canceled.connect(job.cancel)

    def ended(message: Optional[str] = None) -> None:
        _running.discard(job)
        progress.canceled.disconnect(job.cancel)
        progress.close()
        progress.deleteLater()
        snapshot.deleteLater()
        job.deleteLater()
        written = f"{len(job.written)} file(s) in {folder}"
        if job.state == "done":
            window.statusBar().showMessage(f"Exported {written}", 15000)
        elif job.state == "cancelled":
            window.statusBar().showMessage(f"Export cancelled: {written}", 15000)
        else:
            warn(window, "Export failed", f"{message} ({written} were written)")

    job.finished.connect(ended)
    job.cancelled.connect(ended)
    job.failed.connect(ended)
    _running.add(job)
    job.start()
    return job


# -- arrays -------------------------------------------------------------------------------------
class ExportDataDialog(QDialog):
    def __init__(self, window) -> None:
        super().__init__(window)
        session = window.session
        stage = stages.stage(session.stage_key)
        self.setWindowTitle("Export trace data")
        form = QFormLayout(self)
        self.folder = FolderRow(preferences.folder(window))
        form.addRow("Folder:", self.folder)
        where = (f", layer {session.layer}, head {session.head}" if stage.per_head else
                 f", layer {session.layer}" if stage.per_layer else "")
        shown = f"stage {stage.number} ({stage.title}{where})"
        self.boxes = {f.name: QCheckBox(f.label.format(stage=shown)) for f in DATA_FORMATS}
        for box in self.boxes.values():
            box.setChecked(True)
            form.addRow(box)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Export")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def formats(self) -> list[str]:
        return [name for name, box in self.boxes.items() if box.isChecked()]


class DataExport(QObject):
    """Writes the files in a job on the export lane of `workers` (the window's pool);
    `finished(list of (path, replaced))` or `failed(message)`."""
    finished = Signal(list)
    failed = Signal(str)

    def __init__(self, folder: Path, files: list, parent: Optional[QObject] = None,
                 workers: Optional[WorkerPool] = None) -> None:
        super().__init__(parent)
        self.workers = workers if workers is not None else WorkerPool(max_threads=1)
        self.job = Job(0, write_data_files, (folder, files), lane=LANE)

    def start(self) -> None:
        self.workers.start(self.job, self._done, self._failed)

    def _done(self, _number: int, written: list) -> None:
        self.finished.emit(written)

    def _failed(self, _number: int, message: str, user_error: bool) -> None:
        self.failed.emit(message if user_error else f"writing failed: {message}")

    def wait(self, msecs: int = -1) -> bool:
        return self.workers.wait_for(self.job, msecs)


def open_data_dialog(window) -> Optional[ExportDataDialog]:
    if _no_trace(window):
        return None
    dialog = ExportDataDialog(window)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.accepted.connect(lambda: start_data_export(window, dialog.folder.path(), dialog.formats()))
    dialog.open()
    return dialog


def facts_file(session) -> tuple:
    """("export-facts.json", write): the same facts an exported figure carries."""
    import json

    from ...io.array_export import write_bytes
    from .metadata import figure_facts

    facts = figure_facts(session.model, session.shown_trace, session.stage_key, session.layer,
                         session.head, session.selected_token)
    data = (json.dumps(facts, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return "export-facts.json", lambda path: write_bytes(path, data)


def start_data_export(window, folder: Path, formats: list[str]) -> Optional[DataExport]:
    session = window.session
    if _no_trace(window) or not formats:
        return None
    stage = stages.stage(session.stage_key)
    try:
        folder = prepare_folder(folder)
        files = data_files(session.shown_trace, stage, session.layer, session.head, formats,
                           session.model.tokenizer.id_to_token)
        files.append(facts_file(session))         # where the arrays came from, beside them
    except ModelError as exc:
        warn(window, "Could not export the trace data", str(exc))
        return None
    preferences.set_folder(window, folder)
    existing = [name for name, _ in files if (folder / name).exists()]
    if existing and not ask_replace(window, folder, existing):
        return None
    made_from = session.shown_trace
    return when_shown_ready(window, lambda: _export_data(window, folder, formats, files, made_from),
                            "the trace data")


def _export_data(window, folder: Path, formats: list[str], files: list, made_from) -> Optional[DataExport]:
    """`files` were made from `made_from`; if the stepper shows another trace now (the
    intervened pass came in while the export waited for it) they are made again from it."""
    session, stage = window.session, stages.stage(window.session.stage_key)
    if _no_trace(window):
        return None
    if session.shown_trace is not made_from:
        try:
            files = data_files(session.shown_trace, stage, session.layer, session.head, formats,
                               session.model.tokenizer.id_to_token)
            files.append(facts_file(session))
        except ModelError as exc:
            warn(window, "Could not export the trace data", str(exc))
            return None
    export = DataExport(folder, files, parent=window, workers=session.workers)
    window.statusBar().showMessage(f"Exporting trace data to {folder}…")

    def done(written: list) -> None:
        _running.discard(export)
        window.statusBar().showMessage(f"Exported {len(written)} file(s) to {folder}", 15000)
        export.deleteLater()

    def failed(message: str) -> None:
        _running.discard(export)
        warn(window, "Could not export the trace data", message)
        export.deleteLater()

    export.finished.connect(done)
    export.failed.connect(failed)
    _running.add(export)
    export.start()
    return export
