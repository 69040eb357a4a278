"""The Positions view (issue 13): the positions laboratory's results over seeds with ties marked,
the five training curves, the E–P interference figure of the selected variant and of the model
opened in the stepper, an explanation quoting the table, and a button that opens the selected
variant in the stepper. The opened model is measured by state/positions.py's
YourModelMeasurement (its requests, tested without Qt) on the view's own worker thread; the view
shows what it notifies."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (QFileDialog, QGridLayout, QHBoxLayout, QLabel, QPushButton,
                               QSplitter, QVBoxLayout, QWidget)

from ...core.model.errors import ModelError
from ...io.positions_lab import LabFolder, read_lab_folder
from ...io.resources import resources_dir
from ...state.positions import YourModel, YourModelMeasurement
from ..connections import Connections
from ..explain.explanation_panel import ExplanationPanel
from ..session import Session
from ..workers import WorkerPool
from . import explain
from .bundle import PositionsFigures
from .results import build_table
from .table import ResultsTable

TIE_NOTE = ("Mean (min–max) over seeds {seeds}. Per column: <b>bold, green</b> = the best mean; "
            "<span style='background:#fff2cc'>&nbsp;≈ yellow&nbsp;</span> = its seed range overlaps "
            "the best's: a <b>tie</b> at {n} seeds, not a difference; plain = its whole range is worse. "
            "Interference and probe columns are not ranked.")


def shipped_lab_dir() -> Path:
    return resources_dir() / "positions"


class PositionsView(QWidget):
    variantShown = Signal(str)          # the selected variant's figures are drawn
    yourModelShown = Signal(str)        # the opened model's side reached a state (see YourModel)

    def __init__(self, session: Session, settings: Optional[QSettings] = None,
                 open_in_stepper: Optional[Callable[[str], None]] = None,
                 lab_root: Optional[Path] = None, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.session = session
        self.settings = settings
        self.open_in_stepper = open_in_stepper
        self.lab: Optional[LabFolder] = None
        self.table_data = None
        self.your_model = YourModel()
        self.figures = PositionsFigures()
        self.workers = WorkerPool(max_threads=1)
        self.measurement = YourModelMeasurement(self.workers)
        self.measurement.events.changed.connect(self._set_your_model)    # (shutdown disconnects)
        self._build()
        self.connections = Connections([(session.modelChanged, self._on_model_changed)])
        self.load_lab(lab_root or shipped_lab_dir())

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 2)
        outer.setSpacing(4)
        top = QHBoxLayout()
        self.source = QLabel()
        self.source.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        top.addWidget(self.source, stretch=1)
        self.folder_button = QPushButton("Open Results Folder…")
        self.folder_button.setToolTip("A folder written by `transformer-stepper positions-lab --out DIR`")
        self.folder_button.clicked.connect(self.ask_lab_folder)
        top.addWidget(self.folder_button)
        self.open_button = QPushButton("Open this Variant in the Stepper")
        self.open_button.clicked.connect(self.open_selected)
        top.addWidget(self.open_button)
        outer.addLayout(top)

        self.horizontal = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.setSpacing(2)
        self.table = ResultsTable()              # as high as its rows: the plots take the rest
        self.table.variantSelected.connect(self.show_variant)
        left_layout.addWidget(self.table)
        self.tie_note = QLabel()
        self.tie_note.setWordWrap(True)
        self.tie_note.setStyleSheet("color: #444;")
        left_layout.addWidget(self.tie_note)

        plots = QWidget()
        grid = self.grid = QGridLayout(plots)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(6)
        grid.addWidget(self.figures.curves, 0, 0, 3, 1)
        grid.addWidget(self.figures.variant, 0, 1)
        self.your_model_line = QLabel()
        self.your_model_line.setStyleSheet("color: #444;")
        self.your_model_line.setWordWrap(True)
        grid.addWidget(self.your_model_line, 1, 1)
        grid.addWidget(self.figures.your_model, 2, 1)
        grid.setColumnStretch(0, 1)
        grid.setColumnStretch(1, 1)
        grid.setRowStretch(0, 1)
        grid.setRowStretch(2, 1)
        for figure in (self.figures.curves, self.figures.variant, self.figures.your_model):
            figure.hovered.connect(self._hovered)
        left_layout.addWidget(plots, stretch=1)
        self.explanation = ExplanationPanel()
        self.explanation.setMinimumWidth(260)
        self.horizontal.addWidget(left)
        self.horizontal.addWidget(self.explanation)
        self.horizontal.setStretchFactor(0, 1)
        self.horizontal.setSizes([1200, 330])
        outer.addWidget(self.horizontal, stretch=1)
        self.readout = QLabel("Click a row for its interference figure; hover a plot for exact values.")
        self.readout.setStyleSheet("color: #444;")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.readout)

    # -- the lab's results --------------------------------------------------------------------
    def load_lab(self, root: Path) -> bool:
        """Show the lab folder at `root` (a few files: milliseconds). False, with the reason on
        the readout line, if it cannot be read; what was shown stays."""
        try:
            loaded = read_lab_folder(root)
        except ModelError as exc:
            self.readout.setText(f"⚠ {exc}")
            return False
        previous = self.table.selected_variant()
        self.lab, self.table_data = loaded, build_table(loaded)
        seeds = ", ".join(map(str, self.table_data.seeds))
        shipped = Path(root).resolve() == shipped_lab_dir().resolve()
        self.source.setText(f"<b>Positions laboratory</b> · {'shipped results' if shipped else root} · "
                            f"{len(loaded.variants)} variants × seeds {seeds}")
        self.tie_note.setText(TIE_NOTE.format(seeds=seeds, n=len(self.table_data.seeds)))
        self.table.show_table(self.table_data)
        self._show_your_model_row()
        selected = previous if previous in loaded.variants else next(iter(loaded.variants))
        self.figures.curves.draw(loaded.variants, selected)
        self.table.blockSignals(True)             # the row may be selected already: draw it here
        self.table.select_variant(selected)
        self.table.blockSignals(False)
        self.show_variant(selected)
        return True

    def ask_lab_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a positions-lab results folder",
                                                  str(self.lab.root if self.lab else Path.home()))
        if folder:
            self.load_lab(Path(folder))

    def selected_variant(self) -> Optional[str]:
        return self.figures.variant_name

    def show_variant(self, name: str) -> None:
        if self.lab is None or name not in self.lab.variants:
            return
        self.figures.draw_variant(self.lab, name)
        self.open_button.setEnabled(True)
        self.open_button.setToolTip(str(self.lab.variants[name].folder))
        self._set_explanation()
        self.variantShown.emit(name)

    def open_selected(self) -> Optional[str]:
        """Open the selected variant's model folder in the stepper (the text stays). -> its path."""
        name = self.selected_variant()
        if self.lab is None or name is None or self.open_in_stepper is None:
            return None
        path = str(self.lab.variants[name].folder)
        self.open_in_stepper(path)
        return path

    # -- the model opened in the stepper ------------------------------------------------------------
    def _on_model_changed(self) -> None:
        self.measurement.model_changed(self.session.model, self.isVisible())

    def measure_your_model(self) -> None:
        """Measure the opened model's E-P interference in a worker (GPT-2: seconds); models
        without a position vector are said so at once."""
        self.measurement.measure(self.session.model)

    def _set_your_model(self, state: YourModel) -> None:
        self.your_model = state
        self._show_your_model_row()
        figure = self.figures.your_model
        if state.state == "measured":
            figure.draw(state.name, state.interference)
            self.your_model_line.setText(f"Your model, <b>{state.name}</b>: all {state.interference['n_tokens']:,} "
                                         f"token rows, {state.interference['n_positions']:,} positions")
        else:
            line = {"none": "Your model: open a model in the Stepper to measure it here.",
                    "computing": f"Your model, <b>{state.name}</b>: measuring…",
                    "without": f"Your model, <b>{state.name}</b>: {state.why}.",
                    "failed": f"Your model, <b>{state.name}</b>: could not measure it ({state.why})."}[state.state]
            self.your_model_line.setText(line)
        figure.setVisible(state.state == "measured")
        self.grid.setRowStretch(2, 1 if state.state == "measured" else 0)   # else the variant's takes it
        self._set_explanation()
        if state.state != "computing":
            self.yourModelShown.emit(state.state)

    def _show_your_model_row(self) -> None:
        state = self.your_model
        notes = {"none": "open a model in the Stepper", "computing": "measuring…",
                 "without": state.why, "failed": f"could not measure: {state.why}", "measured": ""}
        self.table.show_your_model(state.name or "none open", notes[state.state],
                                   state.interference if state.state == "measured" else None)

    # -- explanation, hover, export --------------------------------------------------------------
    def _set_explanation(self) -> None:
        if self.table_data is not None:
            self.explanation.show_markdown(explain.render(self.table_data, self.selected_variant(),
                                                          self.your_model))

    def _hovered(self, text: str) -> None:
        self.readout.setText(text)

    def export_figures_dialog(self, folder: Optional[str] = None) -> list:
        from .export import export_view

        return export_view(self, folder)

    # -- showing, closing ----------------------------------------------------------------------------
    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.measurement.stale:
            self.measure_your_model()

    def shutdown(self, msecs: int = -1) -> bool:
        """Stop listening to the session; wait for a measurement under way (window close, tests)."""
        self.connections.disconnect_all()
        self.measurement.drop()             # a result still on its way is dropped
        try:
            self.measurement.events.changed.disconnect(self._set_your_model)
        except TypeError:                   # (shut down before)
            pass
        return self.workers.wait(msecs)

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)
