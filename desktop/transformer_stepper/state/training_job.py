"""A training run as a Job (state/scheduler.py): core.training's recipe with a TrainControl
(Pause and Resume between steps) and a TrainingHistory, run wherever the scheduler runs jobs.
It reports a Frame — plain copies, never the live arrays — as the news of a progress report,
at most every `frame_seconds`; the job's cancel() is the Stop button: the run ends between two
steps with what it has (an Outcome without a trained model), or, stopped before its first
step, cancelled. Nothing here computes a number of its own: every value is the training
code's. No Qt."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..core.training.control import TrainControl, TrainingStopped
from ..core.training.history import TrainingHistory
from ..core.training.loop import TrainProgress
from ..core.training.recipe import Recipe, TrainedModel, build_dataset, new_history, train_builtin
from .scheduler import Cancelled, Job

FRAME_SECONDS = 0.2          # frames at up to 5 per second
LANE = "training"            # a lane of its own: minutes of training never hold back tracing


@dataclass(frozen=True)
class Frame:
    step: int
    steps: int
    tokens: int
    seconds: float                       # training time so far, pauses excluded
    train_steps: np.ndarray              # every step so far ...
    train_losses: np.ndarray             # ... and its loss
    train_tokens: np.ndarray
    heldout_steps: np.ndarray
    heldout_tokens: np.ndarray
    heldout_losses: np.ndarray
    unigram_loss: float
    table: np.ndarray                    # E now [n_vocab, d_model], a copy
    batch_ids: np.ndarray                # distinct ids of the last batch's real inputs
    lookup_grad_norms: np.ndarray        # [n_vocab] the last step's, through the lookup
    head_grad_norms: np.ndarray          # [n_vocab] the last step's, through the tied head
    snapshot_steps: np.ndarray
    separation: np.ndarray

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def make_frame(progress: TrainProgress, history: TrainingHistory) -> Frame:
    detail = progress.detail
    return Frame(progress.step, progress.steps, progress.tokens, progress.seconds,
                 np.asarray(history.steps), np.asarray(history.losses, dtype=np.float32),
                 np.asarray(history.tokens), np.asarray(history.heldout_steps),
                 np.asarray(history.heldout_tokens), np.asarray(history.heldout_losses),
                 history.unigram_loss, np.array(detail.params["wte"]), detail.batch_ids(),
                 detail.lookup_grad_norms.copy(), detail.head_grad_norms.copy(),
                 np.asarray(history.snapshot_steps), np.asarray(history.separation))


@dataclass(frozen=True)
class Outcome:
    """How a run ended: finished (trained is set) or stopped (trained is None); the history
    either way."""
    recipe: Recipe
    tokenizer: object
    history: TrainingHistory
    trained: Optional[TrainedModel]


Report = Callable[..., None]             # progress(done, total, news)


class TrainingRun:
    """One run: `job(number)` is what a scheduler starts; `control` pauses and resumes it
    from the caller's thread; `frames_sent` counts the frames reported."""

    def __init__(self, recipe: Recipe, max_snapshots: int = 64,
                 frame_seconds: float = FRAME_SECONDS,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.recipe = recipe
        self.max_snapshots = max_snapshots
        self.frame_seconds = frame_seconds
        self.clock = clock
        self.control = TrainControl()
        self.frames_sent = 0
        self._last_frame = -float("inf")

    def job(self, number: int = 0) -> Job:
        return Job(number, self.run, reports=True, lane=LANE, on_cancel=self.control.stop)

    def run(self, progress: Report) -> Outcome:
        """The job's function (a worker thread). Reports ("what is being done", then Frames)
        as news: progress(step, steps, news)."""
        steps = self.recipe.steps
        progress(0, steps, "generating the corpus…")
        dataset = build_dataset(self.recipe)
        history = new_history(self.recipe, dataset, max_snapshots=self.max_snapshots)
        if self.control.stopped:
            raise Cancelled()             # stopped before the first step: nothing to show
        progress(0, steps, "training…")

        def on_step(step: TrainProgress) -> None:
            now = self.clock()
            if now - self._last_frame >= self.frame_seconds or step.step == step.steps:
                self._last_frame = now
                frame = make_frame(step, history)
                progress(step.step, step.steps, frame)      # raises Cancelled once stopped
                self.frames_sent += 1

        try:
            trained = train_builtin(self.recipe, on_step, dataset=dataset, control=self.control,
                                    history=history)
        except (TrainingStopped, Cancelled):   # Stop: between two steps, with the history so far
            trained = None
        return Outcome(self.recipe, dataset.tokenizer, history, trained)
