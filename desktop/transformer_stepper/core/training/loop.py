"""The seeded training loop: batches of padded sequences, Adam, and a progress callback.

Same seed, same data, same config -> bit-identical parameters (one process, one BLAS
thread count). The callback sees every step; raising from it (KeyboardInterrupt, a cancel
flag in the app) stops training cleanly between steps."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import numpy as np

from ..model.config import ModelConfig
from ..model.errors import ModelError
from . import network
from ..model.blas import blas_threads
from .control import TrainControl
from .optim import Adam, AdamConfig, clip_gradients, learning_rate


@dataclass(frozen=True)
class TrainProgress:
    step: int           # 1-based, after the update
    steps: int
    loss: float         # this step's mean cross-entropy (nats per token)
    lr: float
    tokens: int         # predicted tokens so far
    seconds: float      # wall time so far, pauses excluded
    detail: Optional["StepDetail"] = None   # with train(step_detail=True)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class StepDetail:
    """What the step just taken did to the embedding table E (wte), for watching it learn.

    E's gradient has two parts: the lookup's (x = one-hot · E: back-propagation scatters into
    the rows of the ids in the batch, and only those) and, with the LM head tied to E, the
    head's (logits = h · Eᵀ: every row gets one). Norms are of the raw gradient, before
    clipping; weight decay then shrinks every row of E a little as well."""
    params: dict                     # the live parameters after the update: copy what you keep
    input_ids: np.ndarray            # [batch, n_seq] the batch's inputs (padding included)
    input_weights: np.ndarray        # [batch, n_seq] 1 where an input is a real token
    lookup_grad_norms: np.ndarray    # [n_vocab] ‖row‖ of the lookup part of dL/dE
    head_grad_norms: np.ndarray      # [n_vocab] ‖row‖ of the head part of dL/dE

    def batch_ids(self) -> np.ndarray:
        """The distinct ids of the batch's real (unpadded) inputs, sorted."""
        return np.unique(self.input_ids[self.input_weights > 0])


ProgressCallback = Optional[Callable[[TrainProgress], None]]


def pad_batch(sequences: Sequence[np.ndarray], pad_id: int):
    """Id sequences -> (inputs, targets, weights), each [batch, longest - 1]; a target is the
    next id, and padding gets weight 0 (causal attention never lets it reach real positions)."""
    longest = max(len(s) for s in sequences)
    ids = np.full((len(sequences), longest), pad_id, dtype=np.int64)
    for row, seq in enumerate(sequences):
        ids[row, :len(seq)] = seq
    weights = np.zeros((len(sequences), longest - 1), dtype=np.float32)
    for row, seq in enumerate(sequences):
        weights[row, :len(seq) - 1] = 1.0
    return ids[:, :-1], ids[:, 1:], weights


def batches(sequences: Sequence[np.ndarray], batch_size: int, rng: np.random.Generator,
            pad_id: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Endless epochs over `sequences` in a fresh seeded order each epoch."""
    if len(sequences) < batch_size:
        raise ModelError(f"training: {len(sequences)} sequences cannot fill a batch of {batch_size}")
    while True:
        order = rng.permutation(len(sequences))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield pad_batch([sequences[i] for i in order[start:start + batch_size]], pad_id)


def init_rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """(initialisation, data order) generators for `seed`."""
    init_rng, data_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    return init_rng, data_rng


def train(config: ModelConfig, sequences: Sequence[np.ndarray], *, steps: int, seed: int,
          batch_size: int = 32, optimizer: AdamConfig = AdamConfig(), pad_id: int = 0,
          callback: ProgressCallback = None, params: Optional[dict] = None,
          threads: Optional[int] = 1, control: Optional[TrainControl] = None,
          step_detail: bool = False) -> dict[str, np.ndarray]:
    """Train from `seed`'s initialisation (or from `params`) for `steps` updates; returns params.
    `threads`: BLAS threads while training (see blas.py; None leaves numpy's setting).
    `control`: pause / stop between steps (TrainingStopped is raised out of here on stop).
    `step_detail`: each progress carries a StepDetail (E's gradient split into its two parts)."""
    if steps <= 0:
        raise ModelError(f"training: steps must be a positive number, got {steps}")
    too_long = [len(s) for s in sequences if len(s) - 1 > config.n_ctx]
    if too_long:
        raise ModelError(f"training: a sequence of {too_long[0]} ids exceeds n_ctx={config.n_ctx}")
    init_rng, data_rng = init_rngs(seed)
    if params is None:
        params = network.init_params(config, init_rng)
    adam = Adam(params, optimizer)
    data = batches(sequences, batch_size, data_rng, pad_id)
    with blas_threads(threads):
        _run(config, params, adam, data, steps, optimizer, callback, control, step_detail)
    return params


def _run(config, params, adam, data, steps, optimizer, callback, control, step_detail) -> None:
    tokens, started = 0, time.perf_counter()
    for step in range(1, steps + 1):
        if control is not None:
            control.checkpoint()
        inputs, targets, weights = next(data)
        parts: Optional[dict] = {} if step_detail else None
        loss, grads = network.loss_and_grads(params, config, inputs, targets, weights, parts)
        detail = None
        if parts is not None:
            detail = StepDetail(params, inputs, weights, np.linalg.norm(parts["lookup"], axis=1),
                                np.linalg.norm(parts["head"], axis=1))
        clip_gradients(grads, optimizer.grad_clip)
        lr = learning_rate(optimizer, step, steps)
        adam.step(params, grads, lr)
        tokens += int(weights.sum())
        if not np.isfinite(loss):
            raise ModelError(f"training: the loss became {loss} at step {step}; lower the learning rate")
        if callback is not None:
            paused = control.paused_seconds if control is not None else 0.0
            callback(TrainProgress(step, steps, loss, lr, tokens,
                                   time.perf_counter() - started - paused, detail))
