"""The Stepper's "Show intervened" switch and the banner above the stage views.

The switch is a checkable action in the stepping toolbar, beside the layer and head: like them
it chooses what the stage views show, and it is where the user steps. It only sets the
session's flag (Session.set_show_intervened): the views draw `session.shown_trace`, so turning
it off shows the clean trace again without recomputing anything. It is enabled while
interventions are active (chosen in the Interventions tab) and turns off when they are cleared.

The banner names the interventions whenever there are any: in amber "INTERVENED: …" while the
views show the intervened pass, so it is never mistaken for the clean model; in grey while they
show the clean one, with the same switch at hand."""
from __future__ import annotations

import html
from typing import Optional

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

from ...core.model.interventions import describe_all
from ..session import Session

SHOWN_STYLE = ("QFrame#intervention_banner { background: #ffd98a; border: 1px solid #c98a00; "
               "border-radius: 3px; }")
CLEAN_STYLE = ("QFrame#intervention_banner { background: #eeeeee; border: 1px solid #c8c8c8; "
               "border-radius: 3px; }")


def show_intervened_action(session: Session, parent) -> QAction:
    action = QAction("Show intervened", parent)
    action.setCheckable(True)
    action.setShortcut(QKeySequence("Ctrl+Shift+I"))
    action.toggled.connect(session.set_show_intervened)

    def update() -> None:
        action.blockSignals(True)            # follow the session without calling it back
        action.setChecked(session.show_intervened)
        action.blockSignals(False)
        action.setEnabled(bool(session.interventions))
        action.setToolTip("Step through the intervened forward pass instead of the clean one "
                          f"(Ctrl+Shift+I): {describe_all(session.interventions)}"
                          if session.interventions else
                          "Choose interventions in the Interventions tab first (ablate a head, "
                          "remove the positions, …); then the stage views can show that pass")
    session.interventionsChanged.connect(update)
    update()
    return action


class InterventionBanner(QFrame):
    def __init__(self, session: Session, action: QAction, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.session = session
        self.setObjectName("intervention_banner")
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 3, 4, 3)
        self.label = QLabel()
        self.label.setWordWrap(True)
        row.addWidget(self.label, stretch=1)
        self.button = QToolButton()          # the same switch, named by what it does next
        self.button.clicked.connect(action.toggle)
        row.addWidget(self.button)
        session.interventionsChanged.connect(self.update_banner)
        self.update_banner()

    def update_banner(self) -> None:
        session = self.session
        chips = html.escape(describe_all(session.interventions))
        self.setVisible(bool(session.interventions))
        if session.show_intervened:
            self.setStyleSheet(SHOWN_STYLE)
            state = ("running the intervened forward pass for this text…" if session.waiting_for_intervened
                     else "the stage views show the intervened forward pass, not the clean model")
            self.label.setText(f"<b>INTERVENED:</b> {chips} — {state}.")
            self.button.setText("Show the clean model")
        else:
            self.button.setText("Show intervened")
            self.setStyleSheet(CLEAN_STYLE)
            self.label.setText(f"The stage views show the clean model. Interventions active: {chips}.")
