"""The main window: text box and token strip on top, the stage list, the stage view and its
explanation side by side, a toolbar to step and to choose layer and head, a status bar."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
from PySide6.QtCore import QEvent, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QApplication, QComboBox, QFileDialog, QLabel, QLineEdit, QListWidget,
                               QListWidgetItem, QMainWindow, QMenu, QMessageBox, QProgressBar, QSplitter,
                               QStackedWidget, QVBoxLayout, QWidget)
from shiboken6 import isValid

from ..core import stages
from ..core.errors import ModelError
from ..core.labels import layer_kind
from . import explanations
from .export.dialogs import add_export_actions
from .export import preferences as export_preferences
from .export.menu import install_plot_menus
from .model_menu import HFCacheMenu, LocalModelsMenu, RecentMenu, RecentModels
from .dequantization_panel import install_dequantization_dock
from .provenance_panel import install_provenance_dock
from .session_file import add_session_actions
from .walk_panel import install_walk_panel
from .detail_budget import DetailBudget
from .weight_budget import WeightBudget
from .session import Session
from .stages import StageView, create_view
from .explanation_panel import ExplanationPanel
from .generate_bar import GenerateBar
from .intervened_toggle import InterventionBanner, show_intervened_action
from .paint_turns import TURN_MS
from .tabs import TabHost
from .timers import one_shot
from .token_strip import TokenStripArea

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
PREBUILD_DELAY_MS = 400
IDLE_BUILD_MS = 60          # the pause between two views built while idle
IDLE_STEP_MS = TURN_MS      # ... and between two steps of building one (a turn each)


def default_settings() -> QSettings:
    return QSettings("transformer-stepper", "transformer-stepper")


class MainWindow(QMainWindow):
    def __init__(self, session: Optional[Session] = None, settings: Optional[QSettings] = None,
                 parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.session = session or Session(self)
        self.settings = settings or default_settings()
        self.recent = RecentModels(self.settings)
        self.views: dict[str, StageView] = {}
        self.errors: list[str] = []              # every error shown, for tests and bug reports
        self.error_box: Optional[QMessageBox] = None
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
        # building a view takes 0.1-0.3 s (pyqtgraph items): the next stage's is built while
        # the user reads this one, so stepping forward only shows it
        self._prebuild = one_shot(self, PREBUILD_DELAY_MS, self._build_next_view)
        self._ahead: list = []                  # ... its figures, painted off screen one per turn
        self._paint_ahead = one_shot(self, TURN_MS, self._paint_one_ahead)
        # while nothing happens, build the stages' views one per turn (a view's plots take
        # 20–100 ms to make), so a stage's first visit only draws
        self._idle_build = one_shot(self, IDLE_BUILD_MS, self._build_one_view)
        self._unfinished: list[StageView] = []  # built while idle, figures not yet finished
        # a new trace or a redrawn view: the explanation's numbers follow in a turn of their own
        self._explain_soon = one_shot(self, 0, self._update_explanation)
        self._refresh_model_widgets()
        self._show_stage(self.session.stage_key)
        self.focus_stage()

    def eventFilter(self, watched, event) -> bool:
        # Esc in the text box gives the arrow keys back to stepping
        if (watched is self.text_box and event.type() == QEvent.Type.KeyPress
                and event.key() == Qt.Key.Key_Escape):
            self.focus_stage()
            return True
        return super().eventFilter(watched, event)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if QApplication.focusWidget() is None or QApplication.focusWidget() is self.text_box:
            self.focus_stage()

    # -- building -----------------------------------------------------------------------
    def _build_central(self) -> None:
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(6, 6, 6, 0)
        layout.setSpacing(4)
        self.text_box = QLineEdit(self.session.text)
        self.text_box.setPlaceholderText("Type a sentence; the model re-runs as you type")
        self.text_box.setClearButtonEnabled(True)
        font = self.text_box.font()
        font.setPointSize(font.pointSize() + 2)
        self.text_box.setFont(font)
        self.text_box.textEdited.connect(self.session.set_text)
        self.text_box.setToolTip("Type a sentence. Esc returns the arrow keys to stepping; "
                                 "Alt+← / Alt+→ step from here too.")
        self.text_box.installEventFilter(self)
        layout.addWidget(self.text_box)
        self.text_problem = QLabel()
        self.text_problem.setStyleSheet("color: #b00020;")
        self.text_problem.setVisible(False)
        layout.addWidget(self.text_problem)
        self.tokens = TokenStripArea()
        self.tokens.strip.tokenClicked.connect(self.session.select_token)
        layout.addWidget(self.tokens)
        # the Stepper shows the clean or the intervened pass: one switch, the banner says which
        self.show_intervened_action = show_intervened_action(self.session, self)
        self.intervention_banner = InterventionBanner(self.session, self.show_intervened_action)
        layout.addWidget(self.intervention_banner)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.stage_list = QListWidget()
        self.stage_list.setMinimumWidth(190)
        self.stage_list.setMaximumWidth(280)
        for stage in stages.STAGES:
            item = QListWidgetItem(f"{stage.number:>2}  {stage.title}")
            item.setData(Qt.ItemDataRole.UserRole, stage.key)
            self.stage_list.addItem(item)
        self.stage_list.currentItemChanged.connect(self._stage_clicked)
        self.stack = QStackedWidget()
        self.stack.setFocusPolicy(Qt.FocusPolicy.StrongFocus)   # holds the focus for ← / →
        self.explanation = ExplanationPanel()
        self.explanation.setOpenExternalLinks(False)
        self.explanation.setMinimumWidth(240)
        self.splitter.addWidget(self.stage_list)
        self.splitter.addWidget(self.stack)
        self.splitter.addWidget(self.explanation)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([220, 880, 320])
        layout.addWidget(self.splitter, stretch=1)
        self.stepper_page = central
        self.tabs = TabHost(self)                  # "Stepper", "Compare", ...: ui/tabs.py
        self.tabs.currentChanged.connect(lambda _: self._update_stepping())
        self.setCentralWidget(self.tabs)

    def _build_actions(self) -> None:
        menu = self.menuBar().addMenu("&File")
        open_folder = menu.addAction("Open Model &Folder…", self.open_folder_dialog)
        open_folder.setShortcut(QKeySequence.StandardKey.Open)
        menu.addAction("Open Model F&ile…", self.open_file_dialog)
        menu.addAction("Open the &Built-in Model", lambda: self.open_model(None))
        self.reopen_action = menu.addAction("&Reopen Last Model", self._reopen_last)
        menu.addMenu(RecentMenu(self.recent, self.open_model, menu))
        menu.addMenu(HFCacheMenu(self.open_model, menu))
        menu.addMenu(LocalModelsMenu(self.open_model, menu))
        menu.addSeparator()
        add_session_actions(self, menu)          # .stepper files: ui/session_file.py
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
        self.session.generation.failed.connect(lambda message: self.statusBar().showMessage(message, 10000))

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
        edit = menu.addAction("Edit the &Text", self._focus_text)
        edit.setShortcut(QKeySequence("Ctrl+L"))
        self.go_menu = menu

    def _build_help_menu(self) -> None:
        from .help import add_help_menu

        add_help_menu(self)

    def _focus_text(self) -> None:
        self.text_box.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.text_box.selectAll()

    def focus_stage(self) -> None:
        """The stage area takes the keyboard, so ← / → step (the text box keeps them for the cursor)."""
        self.stack.setFocus(Qt.FocusReason.OtherFocusReason)

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

    def _show_memory(self) -> None:
        resident = resident_memory()
        held = self.session.trace_memory() / 2**20
        trace = f"trace {held:,.1f} MiB" if held < 10 else f"trace {held:,.0f} MiB"
        self.memory_label.setText(trace if resident is None else f"{trace} · process {resident / 2**20:,.0f} MiB")

    def _connect_session(self) -> None:
        s = self.session
        s.modelChanged.connect(self._refresh_model_widgets)
        s.traceChanged.connect(self._on_trace)
        s.layerChanged.connect(self._on_layer)
        s.layerReady.connect(lambda _: self._show_memory())
        s.traceChanged.connect(self._show_memory)
        s.headChanged.connect(self._on_head)
        s.selectionChanged.connect(self.tokens.strip.set_selected)
        s.selectionChanged.connect(lambda _: self._update_explanation())
        s.stageChanged.connect(self._show_stage)
        s.temperatureChanged.connect(lambda _: self._update_explanation())
        s.busyChanged.connect(self._on_busy)
        s.openFailed.connect(lambda message: self.show_error("Could not open the model", message))
        s.computeFailed.connect(self._on_compute_failed)
        s.textChanged.connect(self._on_text_changed)
        s.interventionsChanged.connect(self._update_stepping)

    # -- opening models -----------------------------------------------------------------------
    def open_model(self, path: Optional[str]) -> None:
        self.session.open_model(path)

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
            self.open_model(paths[0])

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
        for row, stage in enumerate(stages.STAGES):
            item = self.stage_list.item(row)
            reason = stage.unavailable_because(model.config if model else None)
            flags = item.flags()
            item.setFlags(flags & ~Qt.ItemFlag.ItemIsEnabled if reason else flags | Qt.ItemFlag.ItemIsEnabled)
            item.setToolTip(f"this model {reason}" if reason
                            else f"computed by transformer_stepper.{stage.function}")
        self._update_stepping()

    def _on_trace(self) -> None:
        self._idle_build.start(IDLE_BUILD_MS)
        trace = self.session.trace
        self.text_problem.setVisible(False)
        if trace is None:
            self.tokens.strip.set_tokens([], [], [], -1)
            self.tokens_label.setText("")
            self._update_explanation()
            return
        self.tokens.strip.set_tokens(self.session.token_labels(), trace.input_ids,
                                     trace.special_tokens_mask, self.session.selected_token,
                                     trace.generated)
        self.tokens.fit_height()
        self.tokens_label.setText(f"{trace.n_seq} tokens" + (" (the text was cut)" if trace.truncated else ""))
        if trace.truncated:
            self._say_truncated(trace)
        self.time_label.setText(f"forward pass {1000 * self.session.compute_seconds:.0f} ms")
        if not np.isfinite(trace.residual["layer_out"][-1]).all():   # NaN/Inf reach the end
            self.text_problem.setText("⚠ the forward pass produced inf or NaN (are the weights "
                                      "corrupt?): non-finite cells are hatched and left out of "
                                      "ranges, maps and choices")
            self.text_problem.setVisible(True)
        self._explain_soon.start()           # (the view draws the new trace itself, being shown)

    def _say_truncated(self, trace) -> None:
        """A text longer than the model's context: said in the warning line, with how much went."""
        from ..core.labels import kept_characters

        kept, total = kept_characters(trace), len(trace.text)
        self.text_problem.setText(
            f"⚠ The text is longer than the model reads ({trace.config.n_ctx} tokens): only its first "
            f"{kept:,} of {total:,} characters are used; the last {total - kept:,} characters "
            f"(from “{trace.text[kept:kept + 24].strip()}…”) were dropped.")
        self.text_problem.setVisible(True)

    def _on_text_changed(self, text: str) -> None:
        if self.text_box.text() != text:
            self.text_box.setText(text)

    def _on_compute_failed(self, message: str) -> None:
        self.text_problem.setText(f"⚠ {message}")
        self.text_problem.setVisible(True)
        self.statusBar().showMessage(message, 8000)

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
        self._update_explanation()

    def _layer_chosen(self, index: int) -> None:
        if index >= 0:
            self.session.set_layer(index)

    def _head_chosen(self, index: int) -> None:
        if index >= 0:
            self.session.set_head(index)

    def _stage_clicked(self, item: Optional[QListWidgetItem], _previous=None) -> None:
        if item is not None:
            self.session.set_stage(item.data(Qt.ItemDataRole.UserRole))

    def _show_stage(self, key: str) -> None:
        view = self.view(key)
        self.stack.setCurrentWidget(view)
        row = [s.key for s in stages.STAGES].index(key)
        self.stage_list.blockSignals(True)
        self.stage_list.setCurrentRow(row)
        self.stage_list.blockSignals(False)
        self._update_stepping()
        self._prebuild.start()

    def _build_next_view(self) -> None:
        """While the user reads, get the next stage ready: built, drawn for the current state
        (when it is in the same layer), laid out and painted once off screen."""
        session = self.session
        if session.model is None or session.trace is None or session.busy:
            return
        target = stages.step(session.stage_key, session.layer, +1, session.model.config)
        if target is None or (target[0] in self.views and target[1] != session.layer):
            return
        view = self.view(target[0])
        if target[1] == session.layer and not view.is_current():
            view.ensure_current()
        view.resize(self.stack.size())
        view.layout().activate()                # the figures' sizes on screen
        # painted off screen one figure per turn (a view's figures take 30-60 ms at 512
        # tokens): showing the view then only copies what they painted
        self._ahead = [figure for _, figure in view.figures() if not figure.isHidden()]
        self._paint_ahead.start()

    def _paint_one_ahead(self) -> None:
        while self._ahead:
            figure = self._ahead.pop(0)
            if isValid(figure) and not figure.isVisible():     # (shown meanwhile: painted)
                figure.grab()
                break
        if self._ahead:
            self._paint_ahead.start()

    def _build_one_view(self) -> None:
        """Build the model's stages' views one step per turn (a view built in steps: a few
        figures a turn), the nearest after the current stage first, then their colour bars one
        per turn (skeletons only: a hidden view draws when shown); the next view after a pause."""
        session = self.session
        if session.model is None:
            return
        if session.busy or QApplication.mouseButtons() != Qt.MouseButton.NoButton:
            self._idle_build.start(IDLE_BUILD_MS)   # later: the user or a worker is active
            return
        if self._unfinished:                    # the view built last: its figures, then its
            view = self._unfinished[-1]         # colour bars, one per turn (a view may have six)
            if isValid(view) and (view.build_step() or view.finish_one()):
                self._idle_build.start(IDLE_STEP_MS)
                return
            self._unfinished.pop()
        keys = [s.key for s in session.available_stages()]
        here = keys.index(session.stage_key) if session.stage_key in keys else 0
        missing = [key for key in keys[here:] + keys[:here] if key not in self.views]
        if missing:
            self._unfinished.append(self.view(missing[0], in_steps=True))
            self._idle_build.start(IDLE_BUILD_MS)

    def views_built(self) -> bool:
        """Every stage of the model has its view (built while idle, or visited), finished."""
        session = self.session
        return (session.model is not None and not self._unfinished
                and all(s.key in self.views for s in session.available_stages()))

    def settled(self) -> bool:
        """The shown stage is drawn for the current state, every figure of it painted, and the
        explanation says its numbers (nothing left for a later turn)."""
        return self.current_view().painted() and not self._explain_soon.isActive()

    def view(self, key: str, in_steps: bool = False) -> StageView:
        """The stage's view, created the first time it is needed, built whole (`in_steps`: the
        idle builder builds it in steps; asked for meanwhile, the rest is built now)."""
        if key not in self.views:
            view = create_view(key, self.session, self.stack, in_steps=in_steps)
            install_plot_menus(view)             # right-click: Export as PNG / SVG
            view.updated.connect(self._view_updated)
            self.stack.addWidget(view)
            self.views[key] = view
        elif not in_steps:
            self.views[key].build_all()
        return self.views[key]

    def current_view(self) -> StageView:
        return self.view(self.session.stage_key)

    def _view_updated(self) -> None:
        if self.sender() is self.views.get(self.session.stage_key):
            self._explain_soon.start()

    def _update_stepping(self) -> None:
        session = self.session
        stage = stages.stage(session.stage_key)
        config = session.model.config if session.model else None
        stepping = config is not None and self.tabs.current_key() == "stepper"   # arrows: stepper tab only
        self.back_action.setEnabled(stepping and stages.step(stage.key, session.layer, -1, config) is not None)
        self.next_action.setEnabled(stepping and stages.step(stage.key, session.layer, +1, config) is not None)
        where = f" — layer {session.layer}" if stage.per_layer and config else ""
        where += " · intervened" if session.show_intervened else ""
        self.stage_title.setText(f"{stage.number}. {stage.title}{where}"
                                 if self.tabs.current_key() == "stepper" else "")
        self._update_explanation()

    def _update_explanation(self) -> None:
        self._explain_soon.stop()
        key = self.session.stage_key
        view = self.views.get(key)
        stage = stages.stage(key)
        if view is None or self.session.trace is None:
            self.explanation.show_markdown(f"## {stage.number}. {stage.title}\n\n*No trace yet.*")
            return
        view.ensure_current()
        try:
            values, flags = view.explanation_values()
        except ModelError as exc:   # the numbers it quotes need weights that are gone
            self.explanation.show_markdown(f"## {stage.number}. {stage.title}\n\n⚠ {exc}")
            return
        where = (f" · layer {self.session.layer}, head {self.session.head}" if stage.per_head else
                 f" · layer {self.session.layer}" if stage.per_layer else "")
        body = explanations.render_stage(key, values, flags)
        self.explanation.show_markdown(f"## {stage.number}. {stage.title}{where}\n\n{body}")


    # -- settings ----------------------------------------------------------------------------
    def _restore_settings(self) -> None:
        geometry = self.settings.value("geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:
            self.resize(1400, 860)
        splitter = self.settings.value("splitter")
        if splitter is not None:
            self.splitter.restoreState(splitter)

    def save_settings(self) -> None:
        self.settings.setValue("geometry", self.saveGeometry())
        self.settings.setValue("splitter", self.splitter.saveState())
        self.settings.sync()

    def closeEvent(self, event) -> None:
        # the idle builder restarts itself: stopped, or it builds views after they are closed
        self._idle_build.stop()
        self._prebuild.stop()
        self._paint_ahead.stop()
        self._ahead.clear()
        self._explain_soon.stop()
        self._unfinished.clear()
        self.save_settings()
        self.tabs.shutdown()
        self.session.shutdown()
        for view in self.views.values():
            view.close()
        self.provenance_panel.close()
        self.dequantization_panel.close()
        super().closeEvent(event)
