"""The Compare view: sentences (one per line) and a word on top, one token strip per sentence,
the six figures, and the explanation quoting their numbers. Same model, layer and head as the
stepper; it reads them and writes nothing back. A result is drawn one figure per turn of the
session's frame scheduler (state/frames.py), as what is on screen (NOW)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (QComboBox, QGridLayout, QHBoxLayout, QInputDialog, QLabel,
                               QLineEdit, QPlainTextEdit, QPushButton, QSplitter,
                               QVBoxLayout, QWidget)

from ...core.model.errors import ModelError
from ...io.export_formats import DEFAULT_FIGURE_FORMAT
from ...state.frames import NOW
from ..explain.explanation_panel import ExplanationPanel
from ..session import Session
from . import explain, presets
from .bundle import CompareFigures
from .export import install_menu
from .state import TEXT_DEBOUNCE_MS, CompareState
from .strips import SentenceStrips

# figure name -> grid cell (row, column); "entry" and "entry_rotation" share one
PLACES = {"lookup_row": (0, 0), "entry": (0, 1), "entry_rotation": (0, 1),
          "cosine_across_layers": (0, 2), "map": (1, 0), "nearest_words": (1, 1), "attention": (1, 2)}
NUMBERS = {"lookup_row": 1, "entry": 2, "entry_rotation": 2, "cosine_across_layers": 3, "map": 4,
           "nearest_words": 5, "attention": 6}


class CompareView(QWidget):
    updated = Signal()                 # the figures show the latest result

    def __init__(self, session: Session, settings: Optional[QSettings] = None,
                 parent: Optional[QWidget] = None, debounce_ms: int = TEXT_DEBOUNCE_MS) -> None:
        super().__init__(parent)
        self.session = session
        self.settings = settings
        self.state = CompareState(session, debounce_ms, self)
        self.figures = CompareFigures()
        self.draw_seconds = 0.0                # GUI time feeding the figures for the last result
        self._steps = iter(())
        self._full_pending = False
        self._frame_key = ("compare drawing", id(self))     # its task in the frame scheduler
        self._build()
        self.state.resultChanged.connect(self._on_result)
        self.state.messageChanged.connect(self._show_message)
        self.state.failed.connect(self._show_failure)
        self.state.busyChanged.connect(self._on_busy)
        session.headChanged.connect(self._on_head)
        self._listening = True
        self.load_preset(presets.BUILTIN[0])

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 2)
        outer.setSpacing(4)
        top = QHBoxLayout()
        top.addWidget(QLabel("Preset:"))
        self.preset_box = QComboBox()
        self.preset_box.setMinimumWidth(200)
        self.preset_box.activated.connect(self._preset_chosen)
        top.addWidget(self.preset_box)
        self.save_button = QPushButton("Save as Preset…")
        self.save_button.clicked.connect(self.ask_preset_name)
        self.remove_button = QPushButton("Remove Preset")
        self.remove_button.clicked.connect(self.remove_current_preset)
        top.addWidget(self.save_button)
        top.addWidget(self.remove_button)
        top.addSpacing(16)
        top.addWidget(QLabel("Word:"))
        self.word_box = QLineEdit()
        self.word_box.setPlaceholderText("e.g. bank")
        self.word_box.setMaximumWidth(180)
        self.word_box.setClearButtonEnabled(True)
        self.word_box.textEdited.connect(self.state.set_word)
        top.addWidget(self.word_box)
        self.status = QLabel()
        self.status.setStyleSheet("color: #555;")
        top.addWidget(self.status, stretch=1, alignment=Qt.AlignmentFlag.AlignRight)
        outer.addLayout(top)

        self.vertical = QSplitter(Qt.Orientation.Vertical)
        inputs = QSplitter(Qt.Orientation.Horizontal)
        self.editor = QPlainTextEdit()
        self.editor.setPlaceholderText("Two to eight sentences, one per line; the word in each")
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.editor.textChanged.connect(self._on_edited)
        self.strips = SentenceStrips()
        self.strips.tokenClicked.connect(self.state.pick)
        inputs.addWidget(self.editor)
        inputs.addWidget(self.strips)
        inputs.setSizes([420, 900])
        self.vertical.addWidget(inputs)

        below = QWidget()
        below_layout = QVBoxLayout(below)
        below_layout.setContentsMargins(0, 0, 0, 0)
        below_layout.setSpacing(2)
        self.message = QLabel()
        self.message.setStyleSheet("color: #b00020;")
        self.message.setWordWrap(True)
        self.message.setVisible(False)
        below_layout.addWidget(self.message)
        self.horizontal = QSplitter(Qt.Orientation.Horizontal)
        plots = QWidget()
        self.grid = QGridLayout(plots)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(6)
        for name, figure in self.figures.by_name.items():
            row, column = PLACES[name]
            self.grid.addWidget(figure, row, column)
            figure.hovered.connect(self._hovered)
            install_menu(self, NUMBERS[name], name, figure, self._layer_head)
        self.figures.map.pointClicked.connect(self.state.pick)
        self.placeholder = QLabel("Open a model, then type two or more sentences and a word.")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.grid.addWidget(self.placeholder, 0, 0, 2, 3)
        self.explanation = ExplanationPanel()
        self.explanation.setMinimumWidth(260)
        self.horizontal.addWidget(plots)
        self.horizontal.addWidget(self.explanation)
        self.horizontal.setStretchFactor(0, 1)
        self.horizontal.setSizes([1050, 330])
        below_layout.addWidget(self.horizontal, stretch=1)
        self.vertical.addWidget(below)
        self.vertical.setStretchFactor(1, 1)
        self.vertical.setSizes([150, 700])
        outer.addWidget(self.vertical, stretch=1)
        self.readout = QLabel("Hover a plot for exact values; click a token in a sentence to compare it.")
        self.readout.setStyleSheet("color: #444;")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.readout)
        self._fill_presets()
        self._show_figures(False)
        self._set_explanation()

    def _show_figures(self, shown: bool) -> None:
        self.placeholder.setVisible(not shown)
        for name, figure in self.figures.by_name.items():
            rotary_only = name == "entry_rotation"
            applies = name not in ("entry", "entry_rotation") or rotary_only == self.figures.rotary
            figure.setVisible(shown and applies)

    # -- input --------------------------------------------------------------------------------
    def set_sentences(self, lines: list[str], word: Optional[str] = None) -> None:
        """What a user does by typing: the lines, and the word if given (recomputed after the
        pause, as typing)."""
        if word is not None:
            self.word_box.setText(word)
            self.state.set_word(word)
        self.editor.setPlainText("\n".join(lines))

    def _on_edited(self) -> None:
        self.state.set_lines(self.editor.toPlainText().split("\n"))

    def load_preset(self, preset: presets.Preset) -> None:
        self.editor.blockSignals(True)
        self.editor.setPlainText("\n".join(preset.sentences))
        self.editor.blockSignals(False)
        self.word_box.setText(preset.word)
        self.state.load(preset.word, list(preset.sentences))
        index = self.preset_box.findText(preset.name)
        if index >= 0:
            self.preset_box.setCurrentIndex(index)
        self._update_preset_buttons()

    def _fill_presets(self, current: str = "") -> None:
        self.preset_box.blockSignals(True)
        self.preset_box.clear()
        for preset in presets.all_presets(self.settings):
            self.preset_box.addItem(preset.name, preset)
        index = self.preset_box.findText(current) if current else 0
        self.preset_box.setCurrentIndex(max(index, 0))
        self.preset_box.blockSignals(False)
        self._update_preset_buttons()

    def _preset_chosen(self, index: int) -> None:
        preset = self.preset_box.itemData(index)
        if preset is not None:
            self.load_preset(preset)

    def _update_preset_buttons(self) -> None:
        preset = self.preset_box.currentData()
        self.remove_button.setEnabled(preset is not None and not preset.builtin)
        self.save_button.setEnabled(self.settings is not None)

    def ask_preset_name(self) -> Optional[QInputDialog]:
        if self.settings is None:
            return None
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Save as preset")
        dialog.setLabelText("Name of this comparison:")
        dialog.setTextValue(f"{self.state.word or 'my words'}: my sentences")
        dialog.textValueSelected.connect(self.save_preset)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def save_preset(self, name: str) -> None:
        if self.settings is None or not name.strip():
            return
        taken = {p.name for p in presets.BUILTIN}
        name = name.strip() if name.strip() not in taken else f"{name.strip()} (mine)"
        presets.save_preset(self.settings, name, self.state.word, self.state.texts())
        self._fill_presets(current=name)

    def remove_current_preset(self) -> None:
        preset = self.preset_box.currentData()
        if self.settings is not None and preset is not None and not preset.builtin:
            presets.remove_preset(self.settings, preset.name)
            self._fill_presets()

    # -- output -------------------------------------------------------------------------------
    def export_figures_dialog(self, folder: Optional[str] = None) -> list:
        """File → Export Figures of This Tab: every figure shown, into a folder (asked for
        unless given), rendered like the command line's `compare`. -> the files written."""
        from ...io.compare_csv import write_compare_csv
        from ..export import preferences
        from ..export.dialogs import ask_folder, ask_replace
        from ..export.menu import warn
        from ..export.render import ExportOptions
        from .export import write_figures

        result = self.state.result
        if result is None or result.comparison is None or not result.comparison.occurrences:
            warn(self, "Nothing to export", "type two or more sentences and a word they share first")
            return []
        if folder is None:
            folder = ask_folder(self, "Export the Compare figures into", str(preferences.folder(self)))
            if not folder:
                return []
        folder = Path(folder)
        layer, head = self._layer_head()
        options = ExportOptions(format=DEFAULT_FIGURE_FORMAT, scale=preferences.scale(self), dark=preferences.dark(self))
        existing = [p.name for p in folder.glob("compare*") if p.is_file()]
        if existing and not ask_replace(self, folder, sorted(existing)):
            return []
        preferences.set_folder(self, folder)
        model = self.session.model
        description = (f"Transformer Stepper · {model.name if model is not None else ''} · "
                       f"compare '{self.state.word}'")
        try:
            written = write_figures(self.figures, folder, options, layer, head, description)
            written.append(write_compare_csv(folder, result.comparison)[0])
        except ModelError as exc:
            warn(self, "Export failed", str(exc))
            return []
        status = getattr(self.window(), "statusBar", None)
        if status is not None:
            status().showMessage(f"wrote {len(written)} files into {folder}", 8000)
        return written

    def _layer_head(self) -> tuple[int, int]:
        result = self.state.result
        layer = result.request.layer if result is not None else self.session.layer
        return layer, self.session.head

    def _labels(self) -> list[list[str]]:
        return self.state.result.labels if self.state.result is not None else []

    def _on_result(self, changed: bool) -> None:
        """Draw the new result one figure per event-loop turn (the window answers input between
        them); `updated` once the last is drawn. A newer result restarts the sequence."""
        result = self.state.result
        comparison = result.comparison if result is not None else None
        self.session.frames.cancel(self._frame_key)
        # a full drawing cut short by a newer result is finished by the newer one, even when
        # that one only brings new attention rows
        changed = changed or self._full_pending
        self._full_pending = changed
        self._draw_busy = 0.0
        if comparison is None or not comparison.occurrences:
            self.strips.show_comparison(comparison, self._labels())
            self._show_figures(False)
            self.placeholder.setText("Nothing to compare: " + "; ".join(comparison.problems)
                                     if comparison is not None and comparison.problems
                                     else "Type two or more sentences and a word they share.")
            self._steps = iter([self._set_explanation])
        else:
            layer, head = self._layer_head()
            if changed:
                steps = [lambda: self.strips.show_comparison(comparison, result.labels)]
                steps += self.figures.steps(comparison, result.attention, layer, head, result.labels)
            else:
                steps = [lambda: self.figures.draw_attention(comparison, result.attention, layer,
                                                             head, result.labels)]
            steps += [lambda: self.figures.set_layer(layer), lambda: self._show_figures(True),
                      self._set_explanation]
            self._steps = iter(steps)
        # eager: a piece each turn, as soon as the last one's paint is done
        self.session.frames.add(self._frame_key, self._draw_step, NOW, eager=True)

    def _draw_step(self) -> bool:
        """One figure of the result (a frame scheduler's piece); the turn after the last one,
        the status line and `updated`."""
        start = time.perf_counter()
        try:
            next(self._steps)()
        except StopIteration:
            self._full_pending = False
            self.draw_seconds = self._draw_busy
            result = self.state.result
            if result is not None:
                self.status.setText(f"{len(result.comparison.occurrences)} compared · computed "
                                    f"{1000 * result.seconds:.0f} ms · drawn "
                                    f"{1000 * self.draw_seconds:.0f} ms")
            self.updated.emit()
            return False
        self._draw_busy += time.perf_counter() - start
        return True

    def _on_head(self, head: int) -> None:
        result = self.state.result
        if result is not None and result.comparison.occurrences and result.attention:
            self.figures.draw_attention(result.comparison, result.attention, result.request.layer,
                                        head, result.labels)
            self._set_explanation()

    def _set_explanation(self) -> None:
        result = self.state.result
        layer, head = self._layer_head()
        markdown = explain.render(result.comparison if result else None,
                                  result.attention if result else None, layer, head,
                                  result.labels if result else [])
        self.explanation.show_markdown(markdown)

    def _show_message(self, message: str) -> None:
        self.message.setText(f"⚠ {message}" if message else "")
        self.message.setVisible(bool(message))

    def _show_failure(self, message: str) -> None:
        self._show_message(message)

    def _on_busy(self, busy: bool) -> None:
        if busy:
            self.status.setText("computing…")

    def _hovered(self, text: str) -> None:
        self.readout.setText(text)

    # -- showing, closing -------------------------------------------------------------------------
    def showEvent(self, event) -> None:
        self.state.set_active(True)
        super().showEvent(event)

    def hideEvent(self, event) -> None:
        if not event.spontaneous():          # minimising the window is not leaving the tab
            self.state.set_active(False)
        super().hideEvent(event)

    def shutdown(self, msecs: int = -1) -> bool:
        """Drop pending work and wait for the worker (window close, tests)."""
        if self._listening:
            self._listening = False
            self.session.headChanged.disconnect(self._on_head)
            self.session.frames.cancel(self._frame_key)
        return self.state.shutdown(msecs)

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)
