"""A memory budget as a user preference (the weight cache's, the trace detail's): a number of
MiB kept in the window's settings, a View menu action that asks for it, and a status-bar label
saying what the budget holds. Subclasses say what the budget applies to and what the label reads."""
from __future__ import annotations

from typing import Optional

from PySide6.QtWidgets import QInputDialog, QLabel, QMainWindow

LIMIT_MIB = 1 << 20          # 1 TiB: a number, not a promise


def stored_mib(settings, key: str, default_bytes: int) -> int:
    """The budget in MiB kept under `key` (the default when absent or not a number)."""
    try:
        value = int(settings.value(key, default_bytes >> 20))
    except (TypeError, ValueError):
        value = default_bytes >> 20
    return min(max(value, 0), LIMIT_MIB)


class BudgetSetting:
    KEY = ""
    DEFAULT_BYTES = 0
    NAME = ""                # the label's object name
    TOOLTIP = ""
    MENU_TEXT = ""
    TITLE = ""
    PROMPT = ""

    def __init__(self, window: QMainWindow) -> None:
        self.window = window
        self.label = QLabel()
        self.label.setObjectName(self.NAME)
        self.label.setToolTip(self.TOOLTIP)
        window.statusBar().addPermanentWidget(self.label)
        self.action = window.view_menu.addAction(self.MENU_TEXT, self.ask)
        window._memory_timer.timeout.connect(self.show)

    def default_bytes(self) -> int:
        """The budget when the settings hold none (a subclass may work it out)."""
        return self.DEFAULT_BYTES

    def is_default(self) -> bool:
        """True when no budget is stored in the settings (the default applies)."""
        try:
            int(self.window.settings.value(self.KEY))
        except (TypeError, ValueError):
            return True
        return False

    def mib(self) -> int:
        return stored_mib(self.window.settings, self.KEY, self.default_bytes())

    def apply_budget(self, nbytes: int) -> None:
        """Hand the budget to what it bounds."""
        raise NotImplementedError

    def text(self) -> Optional[str]:
        """What the label says now (None: nothing to say, the label hides)."""
        raise NotImplementedError

    def apply(self) -> None:
        self.apply_budget(self.mib() << 20)
        self.show()

    def show(self, *_args) -> None:
        text = self.text()
        self.label.setText(text or "")
        self.label.setVisible(text is not None)

    def set_budget(self, mib: int) -> None:
        self.window.settings.setValue(self.KEY, int(mib))
        self.apply()

    def ask(self) -> None:
        mib, ok = QInputDialog.getInt(self.window, self.TITLE, self.PROMPT, self.mib(), 0, LIMIT_MIB, 256)
        if ok:
            self.set_budget(mib)
