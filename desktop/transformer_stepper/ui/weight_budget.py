"""The weight cache's budget as a user preference: how many MiB of widened (bf16/fp16) or
dequantized (GGUF) float32 weights a model keeps (io/checkpoint_params.py; least recently used
first out). View → Weight Cache Budget… sets it (kept in the window's settings, applied to
every model opened); the status bar says what the cache holds. A model that fits stays
widened, so typing re-reads no weights; a bigger one streams through the budget per layer."""
from __future__ import annotations

from typing import Optional

from PySide6.QtWidgets import QInputDialog, QLabel, QMainWindow

from ..io.checkpoint_params import DEFAULT_WEIGHT_BUDGET

KEY = "weight_budget_mib"
LIMIT_MIB = 1 << 20          # 1 TiB: a number, not a promise


def budget_mib(settings) -> int:
    try:
        value = int(settings.value(KEY, DEFAULT_WEIGHT_BUDGET >> 20))
    except (TypeError, ValueError):
        value = DEFAULT_WEIGHT_BUDGET >> 20
    return min(max(value, 0), LIMIT_MIB)


def cache_text(params) -> Optional[str]:
    """'weights 312 / 768 MiB' for a store with a weight cache, else None."""
    if not hasattr(params, "budget"):
        return None
    return f"weights {params.nbytes_widened() / 2**20:,.0f} / {params.budget / 2**20:,.0f} MiB"


class WeightBudget:
    """Binds the preference to the window: the menu action, the status label, each new model."""

    def __init__(self, window: QMainWindow) -> None:
        self.window = window
        self.label = QLabel()
        self.label.setObjectName("weight_cache")
        self.label.setToolTip("Widened / dequantized float32 weights the model keeps, within the "
                              "weight cache budget (View → Weight Cache Budget…)")
        window.statusBar().addPermanentWidget(self.label)
        self.action = window.view_menu.addAction("&Weight Cache Budget…", self.ask)
        window.session.modelChanged.connect(self.apply)
        window._memory_timer.timeout.connect(self.show)
        self.apply()

    def apply(self) -> None:
        model = self.window.session.model
        if model is not None and hasattr(model.params, "set_budget"):
            model.params.set_budget(budget_mib(self.window.settings) << 20)
        self.show()

    def show(self) -> None:
        model = self.window.session.model
        text = cache_text(model.params) if model is not None else None
        self.label.setText(text or "")
        self.label.setVisible(text is not None)

    def set_budget(self, mib: int) -> None:
        self.window.settings.setValue(KEY, int(mib))
        self.apply()

    def ask(self) -> None:
        mib, ok = QInputDialog.getInt(
            self.window, "Weight cache budget",
            "MiB of float32 weights a model keeps widened or dequantized\n"
            "(a model that fits is read once; a bigger one streams layer by layer):",
            budget_mib(self.window.settings), 0, LIMIT_MIB, 256)
        if ok:
            self.set_budget(mib)
