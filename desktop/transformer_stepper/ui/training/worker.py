"""Training off the GUI thread: a QThread runs core.training's recipe with a TrainControl
(Pause, Resume, Stop between steps) and a TrainingHistory, and hands the GUI a Frame — plain
copies, never the live arrays — at most every FRAME_SECONDS. Nothing here computes a number
of its own: every value is the training code's."""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Optional

import numpy as np
from PySide6.QtCore import QThread, Signal

from ...core.errors import ModelError
from ...core.training.control import TrainControl, TrainingStopped
from ...core.training.history import TrainingHistory
from ...core.training.loop import TrainProgress
from ...core.training.recipe import Recipe, TrainedModel, build_dataset, new_history, train_builtin

FRAME_SECONDS = 0.2          # frames at up to 5 per second


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


class TrainingWorker(QThread):
    preparing = Signal(str)              # what is being done before the first step
    frame = Signal(object)               # a Frame
    finished_run = Signal(object)        # an Outcome (trained or stopped)
    failed = Signal(str)                 # one line

    def __init__(self, recipe: Recipe, max_snapshots: int = 64, parent=None) -> None:
        super().__init__(parent)
        self.recipe = recipe
        self.max_snapshots = max_snapshots
        self.control = TrainControl()
        self.frames_sent = 0
        self._last_frame = 0.0

    # -- GUI thread -------------------------------------------------------------------------
    def pause(self) -> None:
        self.control.pause()

    def resume(self) -> None:
        self.control.resume()

    def stop(self) -> None:
        self.control.stop()

    # -- worker thread ----------------------------------------------------------------------
    def run(self) -> None:
        try:
            self.preparing.emit("generating the corpus…")
            dataset = build_dataset(self.recipe)
            history = new_history(self.recipe, dataset, max_snapshots=self.max_snapshots)
            if self.control.stopped:
                raise TrainingStopped
            self.preparing.emit("training…")

            def on_step(progress: TrainProgress) -> None:
                now = time.perf_counter()
                if now - self._last_frame >= FRAME_SECONDS or progress.step == progress.steps:
                    self._last_frame = now
                    self.frames_sent += 1
                    self.frame.emit(make_frame(progress, history))

            try:
                trained = train_builtin(self.recipe, on_step, dataset=dataset,
                                        control=self.control, history=history)
            except TrainingStopped:
                trained = None
            self.finished_run.emit(Outcome(self.recipe, dataset.tokenizer, history, trained))
        except TrainingStopped:
            self.failed.emit("stopped before the first step")
        except ModelError as exc:
            self.failed.emit(str(exc))
        except MemoryError:
            self.failed.emit("out of memory")
        except Exception as exc:           # a bug: report it rather than lose it in a thread
            traceback.print_exc()
            self.failed.emit(f"{type(exc).__name__}: {exc}")
