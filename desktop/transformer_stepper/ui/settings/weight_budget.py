"""The weight cache's budget as a user preference: how many MiB of widened (bf16/fp16) or
dequantized float32 weights a model keeps (io/checkpoint_params.py; when full, the first layers
stay and the rest stream; a GGUF's matrices are multiplied from their stored blocks and not kept). By default it is worked out from the memory free when the window opens
(io/free_memory.py: half of what is left after the detail budget and 1 GiB); View → Weight
Cache Budget… sets it instead (kept in the window's settings, applied to every model opened).
The status bar says what the cache holds, and "free memory" when the budget is that default.
A model that fits stays widened, so typing re-reads no weights; a bigger one streams through
the budget per layer."""
from __future__ import annotations

from typing import Optional

from ...io.free_memory import available_memory, default_weight_budget
from .budget_setting import BudgetSetting
from .detail_budget import budget_mib as detail_budget_mib

KEY = "weight_budget_mib"


def cache_text(params, from_free_memory: bool = False) -> Optional[str]:
    """'weights 312 / 768 MiB' for a store with a weight cache, else None; with
    '(default: free memory)' after it when the budget is the one worked out from free memory."""
    if not hasattr(params, "budget"):
        return None
    text = f"weights {params.nbytes_widened(wait=False) / 2**20:,.0f} / {params.budget / 2**20:,.0f} MiB"
    return text + " (default: free memory)" if from_free_memory else text


class WeightBudget(BudgetSetting):
    """Binds the preference to the window: the menu action, the status label, each new model."""
    KEY, NAME = KEY, "weight_cache"
    TOOLTIP = ("Widened / dequantized float32 weights the model keeps, within the weight cache "
               "budget (View → Weight Cache Budget…)")
    MENU_TEXT, TITLE = "&Weight Cache Budget…", "Weight cache budget"
    PROMPT = ("MiB of float32 weights a model keeps widened or dequantized\n"
              "(a model that fits is read once; a bigger one streams layer by layer):")

    def __init__(self, window) -> None:
        self.free = available_memory()       # once, when the window opens: not the app's own use
        self._default = default_weight_budget(self.free, detail_budget_mib(window.settings) << 20)
        super().__init__(window)
        self.label.setToolTip(self.tooltip())
        window.session.modelChanged.connect(self.apply)
        self.apply()

    def default_bytes(self) -> int:
        return self._default

    def tooltip(self) -> str:
        if self.free is None:
            where = "free memory unknown on this system: default 768 MiB"
        else:
            where = (f"default: half of the {self.free.nbytes / 2**20:,.0f} MiB free at start "
                     f"({self.free.source}) after the detail budget and 1 GiB")
        return f"{self.TOOLTIP}; {where}"

    def apply_budget(self, nbytes: int) -> None:
        self.window.session.weight_budget = nbytes       # the next model opens with it
        model = self.window.session.model
        if model is not None and hasattr(model.params, "set_budget"):
            model.params.set_budget(nbytes)

    def text(self) -> Optional[str]:
        model = self.window.session.model
        if model is None:
            return None
        return cache_text(model.params, self.is_default() and self.free is not None)
