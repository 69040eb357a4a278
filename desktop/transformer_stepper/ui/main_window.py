"""The main window: the tabs (the Stepper first, ui/stepper/stepper_view.py; the others in ui/tabs.py),
the menus, a toolbar to step and to choose layer and head, the docks, a status bar; it opens
models and keeps the settings."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QApplication, QComboBox, QFileDialog, QLabel, QMainWindow, QMenu,
                               QMessageBox, QProgressBar, QWidget)

from ..core.model import stages
from ..core.analysis.labels import layer_kind
from .export.dialogs import add_export_actions
from .export import preferences as export_preferences
from .menus.model_menu import HFCacheMenu, LocalModelsMenu, RecentMenu, RecentModels, add_compare_actions
from .stepper.dequantization_panel import install_dequantization_dock
from .interventions.provenance_panel import install_provenance_dock
from .menus.session_file import add_session_actions
from .walks.walk_panel import install_walk_panel
from .settings.detail_budget import DetailBudget
from .settings.weight_budget import WeightBudget
from .session import Session
from .seq2seq.opener import TranslationWindows
from .stepper.generate_bar import GenerateBar
from .stepper.intervened_toggle import show_intervened_action
from .model_diff.difference_toggle import show_difference_action
from .stepper.stepper_view import StepperView
from . import screen_fit
from .tabs import TabHost

def resident_memory() -> Optional[int]:
    """Anonymous resident bytes of this process (RssAnon: not the mapped weight files), where
    /proc says; None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


MODEL_FILES = "Model files (*.safetensors *.gguf *.npz *.json);;All files (*)"


def default_settings() -> QSettings:
    return QSettings("transformer-stepper", "transformer-stepper")


class MainWindow(QMainWindow):
    def __init__(self, session: Optional[Session] = None, settings: Optional[QSettings] = None,
                 parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.session = session or Session(self)
        self.settings = settings or default_settings()
        self.recent = RecentModels(self.settings)
        self.translations = TranslationWindows()      # encoder–decoders opened from here
        self.errors: list[str] = []              # every error shown, for tests and bug reports
        self.error_box: Optional[QMessageBox] = None
        self._fitted = False                     # fitted to its screen once, when first shown
        self.setWindowTitle("Transformer Stepper")
        self.setAcceptDrops(True)
        self._build_central()
        self._build_actions()
        install_provenance_dock(self)            # Alt-click a value: where it comes from
        install_walk_panel(self)                 # Help → Questions: the guided walks
        install_dequantization_dock(self)        # a GGUF weight's stored blocks
        self._build_status_bar()
        self.weight_budget = WeightBudget(self)  # the weight cache: a preference, in the status bar
        self.detail_budget = DetailBudget(self)  # the layer-detail cache: likewise
        self._connect_session()
        self._restore_settings()
        self._refresh_model_widgets()
        self.stepper.show_stage(self.session.stage_key)
        self.stepper.focus_stage()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._fitted:                     # the frame is known once the window is mapped
            self._fitted = True
            QTimer.singleShot(0, self, lambda: screen_fit.fit_window(self))
        if QApplication.focusWidget() is None or QApplication.focusWidget() is self.stepper.text_box:
            self.stepper.focus_stage()

    # -- building -----------------------------------------------------------------------
    def _build_central(self) -> None:
        # the Stepper shows the clean or the intervened pass: one switch (toolbar, View menu),
        # the Stepper's banner says which
        self.show_intervened_action = show_intervened_action(self.session, self)
        self.show_difference_action = show_difference_action(self.session, self)
        self.stepper = StepperView(self.session, self.show_intervened_action,
                                   show_difference=self.show_difference_action)
        self.stepper.stageShown.connect(self._update_stepping)
        self.stepper.vocabularyWanted.connect(self.show_vocabulary)
        self.tabs = TabHost(self)                  # "Stepper", "Compare", ...: ui/tabs.py
        self.tabs.currentChanged.connect(self._tab_changed)
        self.setCentralWidget(self.tabs)

    def _build_actions(self) -> None:
        menu = self.menuBar().addMenu("&File")
        open_folder = menu.addAction("Open Model &Folder…", self.open_folder_dialog)
        open_folder.setShortcut(QKeySequence.StandardKey.Open)
        menu.addAction("Open Model F&ile…", self.open_file_dialog)
        menu.addAction("Open the &Built-in Model", lambda: self.open_model(None))
        menu.addAction("Built-in &Translator (encoder–decoder)", self.open_builtin_translator)
        self.reopen_action = menu.addAction("&Reopen Last Model", self._reopen_last)
        menu.addMenu(RecentMenu(self.recent, self.open_model, menu))
        menu.addMenu(HFCacheMenu(self.open_model, menu))
        menu.addMenu(LocalModelsMenu(self.open_model, menu))
        menu.addSeparator()
        add_compare_actions(self, menu)          # a second model against this one: ui/model_diff/
        menu.addSeparator()
        add_session_actions(self, menu)          # .stepper files: ui/menus/session_file.py
        add_export_actions(self, menu)
        menu.addSeparator()
        quit_action = menu.addAction("&Quit", self.close)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.file_menu = menu
        toolbar = self.addToolBar("Stepping")
        toolbar.setObjectName("stepping")
        toolbar.setMovable(False)
        # ← / → step wherever the focus is but in the text box (where they move the cursor);
        # Alt+← / Alt+→ and Page Up / Page Down step from anywhere, the text box included
        self.back_action = QAction("◀  Back", self)
        self.back_action.setShortcuts([QKeySequence(Qt.Key.Key_Left), QKeySequence("Alt+Left"),
                                       QKeySequence(Qt.Key.Key_PageUp)])
        self.back_action.setToolTip("Previous stage (← or Alt+←, Page Up)")
        self.back_action.triggered.connect(lambda: self.session.step(-1))
        self.next_action = QAction("Next  ▶", self)
        self.next_action.setShortcuts([QKeySequence(Qt.Key.Key_Right), QKeySequence("Alt+Right"),
                                       QKeySequence(Qt.Key.Key_PageDown)])
        self.next_action.setToolTip("Next stage (→ or Alt+→, Page Down); after a layer's output, "
                                    "the next layer")
        self.next_action.triggered.connect(lambda: self.session.step(+1))
        self._build_go_menu()
        self.view_menu = self.menuBar().addMenu("&View")
        self.view_menu.addAction(self.show_intervened_action)
        self.view_menu.addAction(self.show_difference_action)
        self.caption_action = self.view_menu.addAction("Caption Line Under Exported Figures")
        self.caption_action.setCheckable(True)
        self.caption_action.setToolTip("A line under each exported PNG/SVG: model, stage, layer, head, "
                                       "token, text and app version (always in the file's metadata)")
        self.caption_action.setChecked(export_preferences.caption(self))
        self.caption_action.toggled.connect(lambda on: export_preferences.put(self, "caption", bool(on)))
        self._build_help_menu()
        toolbar.addAction(self.back_action)
        toolbar.addAction(self.next_action)
        toolbar.addSeparator()
        toolbar.addWidget(QLabel(" Layer "))
        self.layer_box = QComboBox()
        self.layer_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.layer_box.currentIndexChanged.connect(self._layer_chosen)
        toolbar.addWidget(self.layer_box)
        toolbar.addWidget(QLabel("  Head "))
        self.head_box = QComboBox()
        self.head_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.head_box.currentIndexChanged.connect(self._head_chosen)
        toolbar.addWidget(self.head_box)
        toolbar.addSeparator()
        toolbar.addAction(self.show_intervened_action)
        toolbar.addAction(self.show_difference_action)
        toolbar.addSeparator()
        self.questions_action = toolbar.addAction("Questions", lambda: self.walk_panel.show_list())
        self.questions_action.setToolTip("Guided walks through the questions people ask about "
                                         "transformers, with this model's numbers (Help → Questions)")
        toolbar.addSeparator()
        self.stage_title = QLabel()
        self.stage_title.setStyleSheet("font-weight: bold; padding-left: 8px;")
        toolbar.addWidget(self.stage_title)
        self.addToolBarBreak()
        self.generate_bar = GenerateBar(self.session, self)      # decoders: generate, undo, sampling
        self.addToolBar(self.generate_bar)
        menu = QMenu("G&enerate", self)
        self.menuBar().insertMenu(self.help_menu.menuAction(), menu)     # before Help
        for action in (self.generate_bar.next_action, self.generate_bar.many_action,
                       self.generate_bar.until_action, self.generate_bar.stop_action,
                       self.generate_bar.undo_action):
            menu.addAction(action)
        self.generate_menu = menu
        self.session.generation.failed.connect(self._generation_failed)

    def _build_go_menu(self) -> None:
        menu = self.menuBar().addMenu("&Go")
        menu.addAction(self.next_action)
        menu.addAction(self.back_action)
        menu.addSeparator()
        for text, keys, step in (("Next &Layer", "Alt+Down", +1), ("Previous La&yer", "Alt+Up", -1)):
            action = menu.addAction(text, lambda step=step: self.session.set_layer(self.session.layer + step))
            action.setShortcut(QKeySequence(keys))
        # Alt+Shift+↑/↓ is taken by many window managers (moving windows between workspaces):
        # Ctrl+] / Ctrl+[ too, which no window manager or text box claims
        for text, keys, step in (("Next &Head", ("Ctrl+]", "Alt+Shift+Down"), +1),
                                 ("Previous Hea&d", ("Ctrl+[", "Alt+Shift+Up"), -1)):
            action = menu.addAction(text, lambda step=step: self.session.set_head(self.session.head + step))
            action.setShortcuts([QKeySequence(k) for k in keys])
        menu.addSeparator()
        first = menu.addAction("&First Stage", lambda: self.session.set_stage(stages.STAGES[0].key))
        first.setShortcut(QKeySequence("Alt+Home"))
        edit = menu.addAction("Edit the &Text", self.stepper.focus_text)
        edit.setShortcut(QKeySequence("Ctrl+L"))
        self.go_menu = menu

    def _build_help_menu(self) -> None:
        from .menus.help import add_help_menu

        add_help_menu(self)

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.model_label = QLabel("no model")
        self.params_label = QLabel()
        self.tokens_label = QLabel()
        self.time_label = QLabel()
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)              # indeterminate: loading has no steps to count
        self.progress.setMaximumWidth(140)
        self.progress.setVisible(False)
        self.busy_label = QLabel()
        self.memory_label = QLabel()
        self.memory_label.setToolTip("What the trace holds (residual stream and the layers computed "
                                     "so far, within its budget) · the process's resident memory")
        for widget in (self.busy_label, self.progress, self.model_label, self.params_label,
                       self.tokens_label, self.time_label, self.memory_label):
            bar.addPermanentWidget(widget)
        self._memory_timer = QTimer(self)
        self._memory_timer.setInterval(2000)
        self._memory_timer.timeout.connect(self._show_memory)
        self._memory_timer.start()

    def _show_memory(self, _layer: Optional[int] = None) -> None:
        resident = resident_memory()
        held = self.session.trace_memory() / 2**20
        trace = f"trace {held:,.1f} MiB" if held < 10 else f"trace {held:,.0f} MiB"
        self.memory_label.setText(trace if resident is None else f"{trace} · process {resident / 2**20:,.0f} MiB")

    def _connect_session(self) -> None:
        s = self.session
        s.modelChanged.connect(self._refresh_model_widgets)
        s.traceChanged.connect(self._on_trace)
        s.layerChanged.connect(self._on_layer)
        s.layerReady.connect(self._show_memory)
        s.traceChanged.connect(self._show_memory)
        s.headChanged.connect(self._on_head)
        s.busyChanged.connect(self._on_busy)
        s.openFailed.connect(self._open_failed)
        s.computeFailed.connect(self._on_compute_failed)
        s.interventionsChanged.connect(self._update_stepping)
        s.differenceChanged.connect(self._update_stepping)
        s.differenceChanged.connect(self._keep_comparing)

    def _keep_comparing(self) -> None:
        """While the Stepper shows A − B, the Two Models tab traces B for every new text even
        when it is not the tab shown."""
        view = self.tabs.views.get("model_diff")
        if view is not None:
            view.set_wanted(self.session.show_difference)

    # -- opening models -----------------------------------------------------------------------
    def open_model(self, path: Optional[str]) -> None:
        if self.translations.wants(path):      # an encoder–decoder: its own window (ui/seq2seq/)
            self.translations.open(path)
            self.recent.add(str(Path(path).expanduser().resolve()))
            return
        self.session.open_model(path)

    def show_vocabulary(self) -> None:
        from .vocabulary import show_vocabulary

        show_vocabulary(self)

    def open_builtin_translator(self) -> None:
        from ..io.resources import builtin_translator_dir

        self.open_model(str(builtin_translator_dir()))

    def open_folder_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a model folder (config.json + weights)",
                                                  self._dialog_start())
        if folder:
            self.open_model(folder)

    def open_file_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a model file", self._dialog_start(), MODEL_FILES)
        if path:
            self.open_model(path)

    def _dialog_start(self) -> str:
        recent = self.recent.paths()
        return str(Path(recent[0]).parent) if recent else str(Path.home())

    def _reopen_last(self) -> None:
        last = self.settings.value("last_model", "")
        if last:
            self.open_model(str(last))

    def dragEnterEvent(self, event) -> None:
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        paths = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:    # Shift-drop: compare with it
                self.compare_with(paths[0])
            else:
                self.open_model(paths[0])

    def compare_with(self, path: str) -> None:
        """Open `path` against the open model in the Two Models tab (ui/model_diff/); an
        encoder–decoder against the translator of the last translation window open (its Two
        Models page), if there is one."""
        window = self.translations.latest() if self.translations.wants(path) else None
        if window is not None:
            window.compare_with(path)
            window.raise_()
            return
        self.tabs.show_tab("model_diff").open_other(path)

    def show_error(self, title: str, message: str) -> None:
        """A non-blocking dialog naming the problem (tests read `errors`)."""
        self.errors.append(message)
        if self.error_box is not None:
            self.error_box.close()
        box = QMessageBox(QMessageBox.Icon.Warning, title, message, QMessageBox.StandardButton.Ok, self)
        box.setInformativeText("The previous model, the text and the stage are unchanged."
                               if self.session.model is not None else
                               "Open a model with File → Open Model Folder… or drop one on the window.")
        box.setWindowModality(Qt.WindowModality.WindowModal)
        box.open()
        self.error_box = box
        self.statusBar().showMessage(f"{title}: {message}", 15000)

    # -- reacting to the session ------------------------------------------------------------
    def _refresh_model_widgets(self) -> None:
        model = self.session.model
        if model is not None:
            path = self.session.model_path
            if path is not None:
                self.recent.add(str(Path(path).expanduser().resolve()))
            self.settings.setValue("last_model", "" if path is None else str(Path(path).expanduser().resolve()))
            config = model.config
            guessed = " — settings guessed" if model.settings_guessed else ""
            self.setWindowTitle(f"Transformer Stepper — {model.name}{guessed}")
            self.model_label.setText(f"{model.name} ({config.family})"
                                     + (" · ⚠ settings guessed" if model.settings_guessed else ""))
            self.model_label.setToolTip("\n".join(model.warnings))
            if model.warnings:
                self.statusBar().showMessage(model.warnings[0], 20000)
            self.params_label.setText(f"{model.n_params() / 1e6:.2f} M parameters")
            for box, count, name in ((self.layer_box, config.n_layer, "layer"),
                                     (self.head_box, config.n_head, "head")):
                box.blockSignals(True)
                box.clear()
                # which layers are local, global or without rope (Gemma 2/3, SmolLM3)
                box.addItems([f"{name} {i} of {count}" + (f" — {kind}" if name == "layer" and
                                                           (kind := layer_kind(config, i)) else "")
                              for i in range(count)])
                box.blockSignals(False)
            self.layer_box.setCurrentIndex(self.session.layer)
            self.head_box.setCurrentIndex(self.session.head)
        self._update_stepping()

    def _on_trace(self) -> None:
        """The status bar's tokens and time (the Stepper shows the trace itself)."""
        trace = self.session.trace
        if trace is None:
            self.tokens_label.setText("")
            return
        self.tokens_label.setText(f"{trace.n_seq} tokens" + (" (the text was cut)" if trace.truncated else ""))
        self.time_label.setText(f"forward pass {1000 * self.session.compute_seconds:.0f} ms")

    def _on_compute_failed(self, message: str) -> None:
        self.statusBar().showMessage(message, 8000)

    def _generation_failed(self, message: str) -> None:
        self.statusBar().showMessage(message, 10000)

    def _open_failed(self, message: str) -> None:
        self.show_error("Could not open the model", message)

    def _on_busy(self, busy: bool, message: str) -> None:
        self.progress.setVisible(busy and message.startswith("Opening"))
        self.busy_label.setText(message if busy else "")

    def _on_layer(self, layer: int) -> None:
        self.layer_box.blockSignals(True)
        self.layer_box.setCurrentIndex(layer)
        self.layer_box.blockSignals(False)
        self._update_stepping()

    def _on_head(self, head: int) -> None:
        self.head_box.blockSignals(True)
        self.head_box.setCurrentIndex(head)
        self.head_box.blockSignals(False)

    def _layer_chosen(self, index: int) -> None:
        if index >= 0:
            self.session.set_layer(index)

    def _head_chosen(self, index: int) -> None:
        if index >= 0:
            self.session.set_head(index)

    def _tab_changed(self, _index: int) -> None:
        self._update_stepping()

    def _update_stepping(self) -> None:
        session = self.session
        stage = stages.stage(session.stage_key)
        config = session.model.config if session.model else None
        stepping = config is not None and self.tabs.current_key() == "stepper"   # arrows: stepper tab only
        self.back_action.setEnabled(stepping and stages.step(stage.key, session.layer, -1, config) is not None)
        self.next_action.setEnabled(stepping and stages.step(stage.key, session.layer, +1, config) is not None)
        where = f" — layer {session.layer}" if stage.per_layer and config else ""
        where += " · intervened" if session.show_intervened else ""
        where += " · A − B" if session.show_difference else ""
        self.stage_title.setText(f"{stage.number_for(config)}. {stage.title}{where}"
                                 if self.tabs.current_key() == "stepper" else "")
        self.stepper.update_explanation()


    # -- settings ----------------------------------------------------------------------------
    def _restore_settings(self) -> None:
        # the user's size from last time, else the preferred one; either within this screen
        # (a laptop's 1366 x 768 takes the window whole), checked again once the frame is known
        geometry = self.settings.value("geometry")
        if geometry is None or not self.restoreGeometry(geometry):
            self.resize(screen_fit.PREFERRED)
        screen = self.screen()
        if screen is not None and not self.isMaximized():
            self.resize(screen_fit.fitted_size(self.size(), screen.availableGeometry().size()))
        splitter = self.settings.value("splitter")
        if splitter is not None:
            self.stepper.splitter.restoreState(splitter)

    def save_settings(self) -> None:
        self.settings.setValue("geometry", self.saveGeometry())
        self.settings.setValue("splitter", self.stepper.splitter.saveState())
        self.settings.sync()

    def closeEvent(self, event) -> None:
        self.stepper.stop_building()
        self.save_settings()
        self.tabs.shutdown()
        self.session.shutdown()
        self.translations.close_all()
        self.stepper.close_views()
        self.provenance_panel.close()
        self.dequantization_panel.close()
        super().closeEvent(event)
