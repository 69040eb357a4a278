"""Questions: the guided walks in a dock. A list of the questions; choosing one walks its steps
with Back / Next, each step putting the window into its state (ui/view_apply.py) and showing a
caption whose numbers core/analysis/walks.py computes in a worker from that state on the open model.
"Leave the walk here" closes the walk and keeps the window as the step left it; closing the dock
or going back to the list ends the walk and gives the user's own state back (their sentence,
tab, stage, layer, head, selection, temperature and interventions, as before the walk). A walk
that has ended sets nothing again: opening a model afterwards leaves the user's state alone."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QDockWidget, QFrame, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,
                               QPushButton, QScrollArea, QStackedWidget, QVBoxLayout, QWidget)

from ...core.model.errors import ModelError
from ...core.analysis.walks import WALK_TRAINING_STEPS, Shown, Walk, fill_step
from ...io.walks import load_walks, walk_extras
from ...state.requests import Latest, Requests
from ...state.session import DEFAULT_TEXT
from ..view_apply import apply_view
from ..workers import Task


WALK_HEIGHT = 190          # px: the plots keep the rest of a 768-pixel screen


@dataclass(frozen=True)
class UserState:
    """What the user had before a walk: given back when the walk ends."""
    text: str
    tab: str
    stage: str
    layer: int
    head: int
    selected: int
    temperature: float
    interventions: tuple

    @classmethod
    def of(cls, window) -> "UserState":
        s = window.session
        return cls(s.text, window.tabs.current_key(), s.stage_key, s.layer, s.head,
                   s.selected_token, s.temperature, tuple(s.interventions))

    def restore(self, window) -> None:
        apply_view(window, text=self.text, tab=self.tab or None, stage=self.stage, layer=self.layer,
                   head=self.head, selected=self.selected, temperature=self.temperature,
                   interventions=self.interventions)


class WalkPanel(QDockWidget):
    def __init__(self, window) -> None:
        super().__init__("Questions", window)
        self.setObjectName("questions")
        self.window_ = window
        self.session = window.session
        self.walk: Optional[Walk] = None
        self.before: Optional[UserState] = None     # the user's state when the walk began
        self.index = 0
        self.shown: Optional[Shown] = None
        self.problem = ""
        self._latest = Latest(Requests())     # the step whose numbers are wanted
        self._extras: Optional[dict] = None
        try:
            self.walks = load_walks()
        except ModelError as exc:
            self.walks, self.problem = [], str(exc)
        self.pages = QStackedWidget()
        self.pages.addWidget(self._list_page())
        self.pages.addWidget(self._walk_page())
        self.setWidget(self.pages)
        self.pages.setMaximumHeight(WALK_HEIGHT)
        self.pages.setMinimumHeight(130)       # three lines of caption under the buttons
        self.setAllowedAreas(Qt.DockWidgetArea.BottomDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)
        self.session.modelChanged.connect(self._on_model)

    # -- pages -------------------------------------------------------------------------------
    def _list_page(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        intro = QLabel("Questions people ask about transformers, each answered in a few steps with the "
                       "open model's own numbers. Choose one:" if not self.problem else f"⚠ {self.problem}")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.question_list = QListWidget()
        for walk in self.walks:
            item = QListWidgetItem(walk.question)
            item.setToolTip(walk.summary)
            self.question_list.addItem(item)
        self.question_list.itemActivated.connect(self._start_item)
        self.question_list.itemClicked.connect(self._start_item)
        layout.addWidget(self.question_list)
        return page

    def _walk_page(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        self.question_label = QLabel()
        self.question_label.setWordWrap(True)
        self.question_label.setStyleSheet("font-weight: bold;")
        self.step_label = QLabel()
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.caption.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        font = self.caption.font()
        font.setPointSize(font.pointSize() + 1)
        self.caption.setFont(font)
        buttons = QHBoxLayout()
        buttons.addWidget(self.step_label, stretch=1)
        self.back_button = QPushButton("◀ Back")
        self.next_button = QPushButton("Next ▶")
        self.leave_button = QPushButton("Leave the walk here")
        self.list_button = QPushButton("All questions")
        self.back_button.clicked.connect(self.back)
        self.next_button.clicked.connect(self.next)
        self.leave_button.clicked.connect(self.leave)
        self.list_button.clicked.connect(self.show_list)
        for button in (self.back_button, self.next_button, self.leave_button, self.list_button):
            buttons.addWidget(button)
        layout.setContentsMargins(8, 2, 8, 4)
        layout.addWidget(self.question_label)
        layout.addLayout(buttons)
        # a long caption scrolls in a short dock (1366×768) rather than being cut off
        caption_area = QScrollArea()
        caption_area.setWidgetResizable(True)
        caption_area.setFrameShape(QFrame.Shape.NoFrame)
        caption_area.setWidget(self.caption)
        layout.addWidget(caption_area, stretch=1)
        return page

    # -- walking -----------------------------------------------------------------------------
    def _start_item(self, item: QListWidgetItem) -> None:
        self.start(self.question_list.row(item))

    def back(self) -> None:
        self.go(self.index - 1)

    def next(self) -> None:
        self.go(self.index + 1)

    def show_list(self) -> None:
        self.end_walk(restore=True)
        self.pages.setCurrentIndex(0)
        self.show()
        self.raise_()

    def start(self, number: int) -> None:
        if not 0 <= number < len(self.walks):
            return
        if self.walk is None and self.before is None:
            self.before = UserState.of(self.window_)
        self.walk = self.walks[number]
        self.question_label.setText(self.walk.question)
        self.pages.setCurrentIndex(1)
        self.show()
        self.go(0)

    def go(self, index: int) -> None:
        """Step `index` of the walk: its numbers computed in a worker, then its state set."""
        if self.walk is None or not 0 <= index < len(self.walk.steps) or self.session.model is None:
            return
        self.index = index
        step = self.walk.steps[index]
        self.step_label.setText(f"Step {index + 1} of {len(self.walk.steps)}: {step.title}")
        self.caption.setText("Computing this step's numbers…")
        self._update_buttons()
        if self._extras is None:
            self._extras = walk_extras()
        self.session.workers.start(Task(self._latest.new(), fill_step, self.session.model, self.walk, index,
                                        DEFAULT_TEXT, self._extras), self._on_filled, self._on_failed)

    def _on_filled(self, request_id: int, shown: Shown) -> None:
        if not self._latest.is_latest(request_id) or shown.walk is not self.walk:
            return
        self.shown = shown
        state = shown.state
        apply_view(self.window_, text=state.text, sentences=state.sentences or None,
                   word=state.word if state.sentences else None, tab=state.tab, stage=state.stage,
                   layer=state.layer, head=state.head, selected=shown.state.selected,
                   temperature=state.temperature, interventions=state.interventions)
        self.caption.setText(shown.caption if shown.applies else f"ℹ {shown.caption}")
        own = shown.walk.steps[shown.index].state            # what this step itself sets
        if own.translator:
            self._show_translator(shown.numbers.get("translation_source", ""))
        if own.train:
            self.window_.tabs.view("training").start_short(WALK_TRAINING_STEPS)

    def _show_translator(self, source: str) -> None:
        """The step shows the built-in translator: its own window, translating `source`."""
        from ...io.resources import builtin_translator_dir

        self.window_.translations.show_translating(str(builtin_translator_dir()), source)

    def _on_failed(self, request_id: int, message: str, user_error: bool) -> None:
        if self._latest.is_latest(request_id):
            self.caption.setText(f"⚠ This step could not be computed on this model: {message}")

    def _update_buttons(self) -> None:
        n = len(self.walk.steps) if self.walk else 0
        self.back_button.setEnabled(self.index > 0)
        self.next_button.setEnabled(self.index < n - 1)

    def leave(self) -> None:
        """Close the walk; the window stays in the step's state."""
        self.end_walk(restore=False)
        self.pages.setCurrentIndex(0)
        self.hide()

    def end_walk(self, restore: bool) -> None:
        """No walk any more (its pending step dropped); `restore`: the user's state back."""
        self.walk = None
        self._latest.drop()
        before, self.before = self.before, None
        if restore and before is not None and self.session.model is not None:
            before.restore(self.window_)

    def closeEvent(self, event) -> None:
        """The dock's close button: the walk ends and the user's state comes back."""
        self.end_walk(restore=True)
        self.pages.setCurrentIndex(0)
        super().closeEvent(event)

    def _on_model(self) -> None:
        if self.walk is not None and self.isVisible():
            self.go(self.index)            # the same step, with the new model's numbers


def install_walk_panel(window) -> WalkPanel:
    panel = WalkPanel(window)
    window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, panel)
    panel.hide()
    window.walk_panel = panel
    return panel
