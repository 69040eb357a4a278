"""What a training run keeps for watching and replaying it: the loss at every step, the
held-out loss at intervals, snapshots of the embedding table E (at most `max_snapshots`,
thinned evenly), the class-separation measure per snapshot, and the whole model at a few
points (steps 0, 10 %, 50 %, 100 % by default). Plain lists and arrays: no Qt, no files
(io/training_history.py writes history.npz)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from .loop import TrainProgress
from .watch import class_separation

MODEL_FRACTIONS = (0.0, 0.1, 0.5, 1.0)


@dataclass
class TrainingHistory:
    classes: Sequence[str]                 # word class per token id (corpus.vocabulary_classes)
    total_steps: int
    max_snapshots: int = 64                # E snapshots kept, at most (thinned evenly)
    heldout_every: int = 50                # steps between held-out losses
    model_fractions: tuple = MODEL_FRACTIONS
    unigram_loss: float = float("nan")     # held-out loss of predicting by word frequency alone
    steps: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    tokens: list = field(default_factory=list)
    heldout_steps: list = field(default_factory=list)
    heldout_tokens: list = field(default_factory=list)
    heldout_losses: list = field(default_factory=list)
    snapshot_steps: list = field(default_factory=list)
    snapshots: list = field(default_factory=list)      # [n_vocab, d_model] float32 copies of E
    separation: list = field(default_factory=list)     # class_separation per snapshot
    models: dict = field(default_factory=dict)         # step -> copy of every parameter

    def __post_init__(self) -> None:
        if self.max_snapshots < 2:
            raise ValueError(f"max_snapshots must be at least 2, got {self.max_snapshots}")
        self.snapshot_every = max(1, self.total_steps // (self.max_snapshots - 1))
        self.model_steps = sorted({int(round(f * self.total_steps)) for f in self.model_fractions})

    # -- recording --------------------------------------------------------------------------
    def start(self, params: dict) -> None:
        """Step 0: the initial (random) table and model."""
        self._snapshot(0, params)

    def record(self, progress: TrainProgress) -> None:
        """After each step (progress.detail must carry the parameters)."""
        self.steps.append(progress.step)
        self.losses.append(progress.loss)
        self.tokens.append(progress.tokens)
        step = progress.step
        if step % self.snapshot_every == 0 or step == self.total_steps or step in self.model_steps:
            self._snapshot(step, progress.detail.params)

    def add_heldout(self, step: int, tokens: int, loss: float) -> None:
        self.heldout_steps.append(step)
        self.heldout_tokens.append(tokens)
        self.heldout_losses.append(loss)

    def wants_heldout(self, step: int) -> bool:
        return step % self.heldout_every == 0 or step == self.total_steps

    def _snapshot(self, step: int, params: dict) -> None:
        if self.snapshot_steps and self.snapshot_steps[-1] == step:
            return
        if len(self.snapshots) >= self.max_snapshots:
            self._thin()
        table = np.array(params["wte"], dtype=np.float32)
        self.snapshot_steps.append(step)
        self.snapshots.append(table)
        self.separation.append(class_separation(table, self.classes))
        if step in self.model_steps:
            self.models[step] = {name: np.array(value) for name, value in params.items()}

    def _thin(self) -> None:
        """Keep every other snapshot (the first always) and snapshot half as often from now on:
        the kept ones stay evenly spread over the run, and memory stays bounded."""
        keep = list(range(0, len(self.snapshots), 2))
        self.snapshot_steps = [self.snapshot_steps[i] for i in keep]
        self.snapshots = [self.snapshots[i] for i in keep]
        self.separation = [self.separation[i] for i in keep]
        self.snapshot_every *= 2

    # -- reading ----------------------------------------------------------------------------
    def nearest_model_step(self, step: int) -> Optional[int]:
        """The step of the kept whole model closest to `step`."""
        if not self.models:
            return None
        return min(self.models, key=lambda s: (abs(s - step), s))

    def to_arrays(self, vocabulary: Sequence[str] = ()) -> dict[str, np.ndarray]:
        """The history as named arrays (history.npz; keys documented in docs/cli.md, "Train")."""
        n_vocab = len(self.classes)
        d_model = self.snapshots[0].shape[1] if self.snapshots else 0
        return {
            "steps": np.asarray(self.steps, dtype=np.int64),
            "losses": np.asarray(self.losses, dtype=np.float32),
            "tokens": np.asarray(self.tokens, dtype=np.int64),
            "heldout_steps": np.asarray(self.heldout_steps, dtype=np.int64),
            "heldout_tokens": np.asarray(self.heldout_tokens, dtype=np.int64),
            "heldout_losses": np.asarray(self.heldout_losses, dtype=np.float32),
            "unigram_loss": np.float32(self.unigram_loss),
            "snapshot_steps": np.asarray(self.snapshot_steps, dtype=np.int64),
            "snapshots": (np.stack(self.snapshots) if self.snapshots
                          else np.zeros((0, n_vocab, d_model), dtype=np.float32)),
            "separation": np.asarray(self.separation, dtype=np.float32),
            "model_steps": np.asarray(sorted(self.models), dtype=np.int64),
            "classes": np.asarray(list(self.classes), dtype=str),
            "vocabulary": np.asarray(list(vocabulary), dtype=str),
        }
