"""Questions: the guided walks in a dock. A list of the questions; choosing one walks its steps
with Back / Next, each step putting the window into its state (ui/view_apply.py) and showing a
caption whose numbers core/analysis/walks.py computes in a worker from that state on the open model.
"Leave the walk here" closes the walk and keeps the window as the step left it; closing the dock
or going back to the list ends the walk and gives the user's own state back (their sentence,
tab, stage, layer, head, selection, temperature and interventions, as before the walk). A walk
that has ended sets nothing again: opening a model afterwards leaves the user's state alone.

The requests (which step is wanted, stale results dropped, the user's state kept and given
back) are state/walks.py's WalkModel, tested without Qt (tests/state/test_walk_requests.py);
this dock shows it and puts the window into the states it names."""
from __future__ import annotations


from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QDockWidget, QFrame, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,
                               QPushButton, QScrollArea, QStackedWidget, QVBoxLayout, QWidget)

from ...core.model.errors import ModelError
from ...core.analysis.walks import WALK_TRAINING_STEPS, Shown
from ...io.walks import load_walks, walk_extras
from ...state.walks import UserState, WalkModel
from ..view_apply import apply_view


WALK_HEIGHT = 190          # px: the plots keep the rest of a 768-pixel screen


def restore_user_state(window, state: UserState) -> None:
    """The window back in the user's state."""
    apply_view(window, text=state.text, tab=state.tab or None, stage=state.stage, layer=state.layer,
               head=state.head, selected=state.selected, temperature=state.temperature,
               interventions=state.interventions)


class WalkPanel(QDockWidget):
    def __init__(self, window) -> None:
        super().__init__("Questions", window)
        self.setObjectName("questions")
        self.window_ = window
        self.session = window.session
        self.problem = ""
        try:
            walks = load_walks()
        except ModelError as exc:
            walks, self.problem = [], str(exc)
        self.walk_model = WalkModel(window.session, walks, walk_extras)
        self.walk_model.events.changed.connect(self._show_step)
        self.walk_model.events.apply.connect(self._apply)
        self.walk_model.events.restore.connect(self._restore)
        self.pages = QStackedWidget()
        self.pages.addWidget(self._list_page())
        self.pages.addWidget(self._walk_page())
        self.setWidget(self.pages)
        self.pages.setMaximumHeight(WALK_HEIGHT)
        self.pages.setMinimumHeight(130)       # three lines of caption under the buttons
        self.setAllowedAreas(Qt.DockWidgetArea.BottomDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)
        self.session.modelChanged.connect(self._on_model)

    # -- the model's state, read -----------------------------------------------------------
    walks = property(lambda self: self.walk_model.walks)
    walk = property(lambda self: self.walk_model.walk)
    index = property(lambda self: self.walk_model.index)
    shown = property(lambda self: self.walk_model.shown)          # the latest step shown
    before = property(lambda self: self.walk_model.before)        # the user's state when the walk began

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
        self.walk_model.back()

    def next(self) -> None:
        self.walk_model.next()

    def show_list(self) -> None:
        self.end_walk(restore=True)
        self.pages.setCurrentIndex(0)
        self.show()
        self.raise_()

    def start(self, number: int) -> None:
        if not 0 <= number < len(self.walks):
            return
        self.question_label.setText(self.walks[number].question)
        self.pages.setCurrentIndex(1)
        self.show()
        self.walk_model.start(number, self.window_.tabs.current_key())

    def go(self, index: int) -> None:
        """Step `index` of the walk: its numbers computed in a worker, then its state set."""
        self.walk_model.go(index)

    def _show_step(self) -> None:
        walking = self.walk_model
        if walking.walk is None:
            return
        step = walking.walk.steps[walking.index]
        self.step_label.setText(f"Step {walking.index + 1} of {walking.n_steps}: {step.title}")
        self.caption.setText(walking.caption)
        self.back_button.setEnabled(walking.can_go_back)
        self.next_button.setEnabled(walking.can_go_on)

    def _apply(self, shown: Shown) -> None:
        """The window in the step's state; what the step itself sets beyond the window's state
        (the translator, a short training run) started."""
        state = shown.state
        apply_view(self.window_, text=state.text, sentences=state.sentences or None,
                   word=state.word if state.sentences else None, tab=state.tab, stage=state.stage,
                   layer=state.layer, head=state.head, selected=state.selected,
                   temperature=state.temperature, interventions=state.interventions)
        own = shown.walk.steps[shown.index].state            # what this step itself sets
        if own.translator:
            self._show_translator(shown.numbers.get("translation_source", ""))
        if own.train:
            self.window_.tabs.view("training").start_short(WALK_TRAINING_STEPS)

    def _restore(self, state: UserState) -> None:
        restore_user_state(self.window_, state)

    def _show_translator(self, source: str) -> None:
        """The step shows the built-in translator: its own window, translating `source`."""
        from ...io.resources import builtin_translator_dir

        self.window_.translations.show_translating(str(builtin_translator_dir()), source)

    def leave(self) -> None:
        """Close the walk; the window stays in the step's state."""
        self.end_walk(restore=False)
        self.pages.setCurrentIndex(0)
        self.hide()

    def end_walk(self, restore: bool) -> None:
        """No walk any more (its pending step dropped); `restore`: the user's state back."""
        self.walk_model.end(restore)

    def closeEvent(self, event) -> None:
        """The dock's close button: the walk ends and the user's state comes back."""
        self.end_walk(restore=True)
        self.pages.setCurrentIndex(0)
        super().closeEvent(event)

    def _on_model(self) -> None:
        if self.isVisible():
            self.walk_model.refresh()      # the same step, with the new model's numbers


def install_walk_panel(window) -> WalkPanel:
    panel = WalkPanel(window)
    window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, panel)
    panel.hide()
    window.walk_panel = panel
    return panel
