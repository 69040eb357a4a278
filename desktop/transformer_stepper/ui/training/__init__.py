"""The Training tab: train the project's own model live and watch its embedding table learn.

    view.py      the tab: recipe, seed, Train / Pause / Stop, figures, nearest rows, snapshots
    worker.py    the training run in a QThread, frames of copies to the GUI
    figures.py   loss, E's map by word class, gradient strips by route, class separation

Every number comes from core/training (recipe, loop, history, watch): no Qt there."""
from .view import TrainingView

__all__ = ["TrainingView"]
