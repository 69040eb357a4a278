"""The Training tab: train the project's own model live and watch its embedding table learn.

    view.py      the tab: recipe, seed, Train / Pause / Stop, figures, nearest rows, snapshots
    worker.py    the run (state/training_job.py) as a job on the window's WorkerPool: its
                 frames (copies) and its end as signals on the GUI thread
    figures.py   loss, E's map by word class, gradient strips by route, class separation

Every number comes from core/training (recipe, loop, history, watch): no Qt there."""
from .view import TrainingView

__all__ = ["TrainingView"]
