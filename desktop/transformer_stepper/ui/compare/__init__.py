"""Compare contexts: the same word in 2–8 sentences, side by side (a tab beside the stepper).

    view.py       the tab: sentences, word, presets, token strips, figures, explanation
    state.py      what is compared; tracing and combining in a worker (only changed sentences)
    bundle.py     the six figures as one set (the view shows them, `transformer-stepper compare`
                  renders them: cli/compare.py)
    figures.py, map_figure.py, nearest_figure.py   the figures
    explain.py    the numbers the explanation quotes (text in resources/explanations/compare.md)
    presets.py    ready comparisons and the user's own
    export.py     right-click export and writing every figure into a folder

The numbers themselves come from core/analysis/compare.py (no Qt)."""
from .view import CompareView

__all__ = ["CompareView"]
