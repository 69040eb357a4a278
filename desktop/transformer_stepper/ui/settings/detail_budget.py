"""The detail budget as a user preference: how many MiB of layer detail (q, k, v, scores,
weights, head outputs, feed-forward arrays) a trace keeps before the least recently shown
layer is dropped (and recomputed when shown again; core/trace/layer_cache.py). View → Detail
Budget… sets it (kept in the window's settings, applied to the trace shown and every trace
after); the status bar says what is kept, and says so when one layer alone is over the budget
(it is kept per head: without its n_head·n² weights, a head's computed when shown; and when
even that is over, kept so all the same: a view needs the layer it shows)."""
from __future__ import annotations

from typing import Optional

from ...core.trace.trace import DEFAULT_DETAIL_BUDGET
from .budget_setting import BudgetSetting, stored_mib

KEY = "detail_budget_mib"


def budget_mib(settings) -> int:
    return stored_mib(settings, KEY, DEFAULT_DETAIL_BUDGET)


def cache_text(trace) -> Optional[str]:
    """'detail 3/12 layers, 854 / 1,024 MiB', or, when one layer alone is over the budget even
    per head, 'detail: layer 7 kept per head, 1,304 MiB > budget 1,024 MiB'; None without a trace."""
    if trace is None:
        return None
    cache = trace.cache
    held, budget = cache.nbytes() / 2**20, cache.budget / 2**20
    over = cache.oversized()
    if over is not None:
        how = "per head" if over in cache.per_head() else "whole"
        return f"detail: layer {over} kept {how}, {held:,.0f} MiB > budget {budget:,.0f} MiB"
    return (f"detail {len(cache.layers())}/{trace.config.n_layer} layers, "
            f"{_mib(held)} / {budget:,.0f} MiB")


def _mib(value: float) -> str:
    # a small model's few layers are a fraction of a MiB: '0.2', not '0'
    return f"{value:.1f}" if 0 < value < 10 else f"{value:,.0f}"


class DetailBudget(BudgetSetting):
    """Binds the preference to the window: the menu action, the status label, the session."""
    KEY, DEFAULT_BYTES, NAME = KEY, DEFAULT_DETAIL_BUDGET, "detail_cache"
    TOOLTIP = ("Layer detail the trace keeps, within the detail budget (View → Detail Budget…); "
               "a layer dropped is recomputed when shown")
    MENU_TEXT, TITLE = "&Detail Budget…", "Detail budget"
    PROMPT = ("MiB of layer detail a trace keeps (q, k, v, scores, weights, ...);\n"
              "a layer dropped is recomputed when it is shown again:")

    def __init__(self, window) -> None:
        super().__init__(window)
        window.session.traceChanged.connect(self.show)
        window.session.layerReady.connect(self.show)
        self.apply()

    def apply_budget(self, nbytes: int) -> None:
        self.window.session.set_detail_budget(nbytes)

    def text(self) -> Optional[str]:
        return cache_text(self.window.session.shown_trace)
