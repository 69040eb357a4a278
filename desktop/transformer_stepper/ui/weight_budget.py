"""The weight cache's budget as a user preference: how many MiB of widened (bf16/fp16) or
dequantized (GGUF) float32 weights a model keeps (io/checkpoint_params.py; least recently used
first out). View → Weight Cache Budget… sets it (kept in the window's settings, applied to
every model opened); the status bar says what the cache holds. A model that fits stays
widened, so typing re-reads no weights; a bigger one streams through the budget per layer."""
from __future__ import annotations

from typing import Optional

from ..io.checkpoint_params import DEFAULT_WEIGHT_BUDGET
from .budget_setting import BudgetSetting, stored_mib

KEY = "weight_budget_mib"


def budget_mib(settings) -> int:
    return stored_mib(settings, KEY, DEFAULT_WEIGHT_BUDGET)


def cache_text(params) -> Optional[str]:
    """'weights 312 / 768 MiB' for a store with a weight cache, else None."""
    if not hasattr(params, "budget"):
        return None
    return f"weights {params.nbytes_widened() / 2**20:,.0f} / {params.budget / 2**20:,.0f} MiB"


class WeightBudget(BudgetSetting):
    """Binds the preference to the window: the menu action, the status label, each new model."""
    KEY, DEFAULT_BYTES, NAME = KEY, DEFAULT_WEIGHT_BUDGET, "weight_cache"
    TOOLTIP = ("Widened / dequantized float32 weights the model keeps, within the weight cache "
               "budget (View → Weight Cache Budget…)")
    MENU_TEXT, TITLE = "&Weight Cache Budget…", "Weight cache budget"
    PROMPT = ("MiB of float32 weights a model keeps widened or dequantized\n"
              "(a model that fits is read once; a bigger one streams layer by layer):")

    def __init__(self, window) -> None:
        super().__init__(window)
        window.session.modelChanged.connect(self.apply)
        self.apply()

    def apply_budget(self, nbytes: int) -> None:
        model = self.window.session.model
        if model is not None and hasattr(model.params, "set_budget"):
            model.params.set_budget(nbytes)

    def text(self) -> Optional[str]:
        model = self.window.session.model
        return cache_text(model.params) if model is not None else None
