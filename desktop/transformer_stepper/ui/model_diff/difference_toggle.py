"""The Stepper's "Show A − B" switch and its banner: beside "Show intervened", and like it only
a session flag (Session.set_show_difference). While it is on and a second model is open against
this one (the Two Models tab), every stage view draws its stage's A − B from the two traces
(ui/model_diff/stage_panel.py) in place of its own figures. One mode at a time: showing A − B
turns "Show intervened" off, and the other way round."""
from __future__ import annotations

import html
from typing import Optional

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

STYLE = ("QFrame#difference_banner { background: #d7e7fb; border: 1px solid #4a7fc1; "
         "border-radius: 3px; }")


def show_difference_action(session, parent) -> QAction:
    action = QAction("Show A − B", parent)
    action.setCheckable(True)
    action.setShortcut(QKeySequence("Ctrl+Shift+D"))
    action.toggled.connect(session.set_show_difference)

    def update() -> None:
        action.blockSignals(True)            # follow the session without calling it back
        action.setChecked(session.show_difference)
        action.blockSignals(False)
        action.setEnabled(session.can_show_difference)
        action.setToolTip(f"Every stage view shows the open model (A) minus {session.against_name} (B) "
                          "on this text (Ctrl+Shift+D)" if session.can_show_difference else
                          "Open a second model against this one first (File → Compare With Model…); "
                          "then every stage view can show A − B")
    session.differenceChanged.connect(update)
    update()
    return action


class DifferenceBanner(QFrame):
    """Above the stage views while they show A − B: what A and B are, and the way back."""

    def __init__(self, session, action: QAction, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.session = session
        self.setObjectName("difference_banner")
        self.setStyleSheet(STYLE)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 3, 4, 3)
        self.label = QLabel()
        self.label.setWordWrap(True)
        row.addWidget(self.label, stretch=1)
        self.button = QToolButton()
        self.button.setText("Show model A alone")
        self.button.clicked.connect(lambda: action.setChecked(False))
        row.addWidget(self.button)
        session.differenceChanged.connect(self.update_banner)
        session.traceChanged.connect(self.update_banner)
        self.update_banner()

    def update_banner(self) -> None:
        session = self.session
        self.setVisible(session.show_difference)
        if not session.show_difference:
            return
        a = html.escape(session.model.name if session.model is not None else "A")
        b = html.escape(session.against_name or "B")
        state = (" — tracing B on this text…" if session.waiting_for_against else "")
        self.label.setText(f"<b>A − B:</b> the stage views show {a} (A) minus {b} (B){state}.")
