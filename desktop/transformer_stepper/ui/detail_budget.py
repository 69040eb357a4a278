"""The detail budget as a user preference: how many MiB of layer detail (q, k, v, scores,
weights, head outputs, feed-forward arrays) a trace keeps before the least recently shown
layer is dropped (and recomputed when shown again; core/trace.py LayerCache). View → Detail
Budget… sets it (kept in the window's settings, applied to the trace shown and every trace
after); the status bar says what is kept, and says so when one layer alone is over the budget
(it is computed and kept whole: the views need the whole layer's arrays)."""
from __future__ import annotations

from typing import Optional

from PySide6.QtWidgets import QInputDialog, QLabel, QMainWindow

from ..core.trace import DEFAULT_DETAIL_BUDGET

KEY = "detail_budget_mib"
LIMIT_MIB = 1 << 20          # 1 TiB: a number, not a promise


def budget_mib(settings) -> int:
    try:
        value = int(settings.value(KEY, DEFAULT_DETAIL_BUDGET >> 20))
    except (TypeError, ValueError):
        value = DEFAULT_DETAIL_BUDGET >> 20
    return min(max(value, 0), LIMIT_MIB)


def cache_text(trace) -> Optional[str]:
    """'detail 3/12 layers, 854 / 1,024 MiB', or, when one layer alone is over the budget,
    'detail: layer 7 kept whole, 2,304 MiB > budget 1,024 MiB'; None without a trace."""
    if trace is None:
        return None
    cache = trace.cache
    held, budget = cache.nbytes() / 2**20, cache.budget / 2**20
    over = cache.oversized()
    if over is not None:
        return f"detail: layer {over} kept whole, {held:,.0f} MiB > budget {budget:,.0f} MiB"
    return (f"detail {len(cache.layers())}/{trace.config.n_layer} layers, "
            f"{held:,.0f} / {budget:,.0f} MiB")


class DetailBudget:
    """Binds the preference to the window: the menu action, the status label, the session."""

    def __init__(self, window: QMainWindow) -> None:
        self.window = window
        self.label = QLabel()
        self.label.setObjectName("detail_cache")
        self.label.setToolTip("Layer detail the trace keeps, within the detail budget "
                              "(View → Detail Budget…); a layer dropped is recomputed when shown")
        window.statusBar().addPermanentWidget(self.label)
        self.action = window.view_menu.addAction("&Detail Budget…", self.ask)
        window.session.traceChanged.connect(self.show)
        window.session.layerReady.connect(lambda _: self.show())
        window._memory_timer.timeout.connect(self.show)
        self.apply()

    def apply(self) -> None:
        self.window.session.set_detail_budget(budget_mib(self.window.settings) << 20)
        self.show()

    def show(self, *_args) -> None:
        text = cache_text(self.window.session.shown_trace)
        self.label.setText(text or "")
        self.label.setVisible(text is not None)

    def set_budget(self, mib: int) -> None:
        self.window.settings.setValue(KEY, int(mib))
        self.apply()

    def ask(self) -> None:
        mib, ok = QInputDialog.getInt(
            self.window, "Detail budget",
            "MiB of layer detail a trace keeps (q, k, v, scores, weights, ...);\n"
            "a layer dropped is recomputed when it is shown again:",
            budget_mib(self.window.settings), 0, LIMIT_MIB, 256)
        if ok:
            self.set_budget(mib)
