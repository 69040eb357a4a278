"""Adam with decoupled weight decay (AdamW), a warmup + cosine learning-rate schedule, and
global-norm gradient clipping. Updates the float32 parameters in place."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping

import numpy as np


@dataclass(frozen=True)
class AdamConfig:
    lr: float = 3e-3
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-8
    weight_decay: float = 0.01     # on matrices only (not gains, biases)
    warmup_steps: int = 100        # linear warmup from 0
    min_lr_ratio: float = 0.1      # cosine decay down to lr * min_lr_ratio at the last step
    grad_clip: float = 1.0         # global gradient norm; 0 = off

    def to_dict(self) -> dict:
        return asdict(self)


def learning_rate(config: AdamConfig, step: int, total_steps: int) -> float:
    """The rate for `step` (1-based): linear warmup, then cosine decay to the floor."""
    if config.warmup_steps and step <= config.warmup_steps:
        return config.lr * step / config.warmup_steps
    span = max(total_steps - config.warmup_steps, 1)
    progress = min(max(step - config.warmup_steps, 0) / span, 1.0)
    floor = config.lr * config.min_lr_ratio
    return floor + (config.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def clip_gradients(grads: dict[str, np.ndarray], max_norm: float) -> float:
    """Scales `grads` in place so their global norm is at most max_norm; returns the norm before."""
    norm = math.sqrt(sum(float(np.vdot(g, g)) for g in grads.values()))
    if max_norm > 0 and norm > max_norm:
        scale = np.float32(max_norm / (norm + 1e-12))
        for g in grads.values():
            g *= scale
    return norm


class Adam:
    def __init__(self, params: Mapping[str, np.ndarray], config: AdamConfig) -> None:
        self.config = config
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}
        self.t = 0

    def step(self, params: dict[str, np.ndarray], grads: Mapping[str, np.ndarray], lr: float) -> None:
        c = self.config
        self.t += 1
        correction1 = 1.0 - c.beta1 ** self.t
        correction2 = 1.0 - c.beta2 ** self.t
        step_size = np.float32(lr / correction1)
        for name, p in params.items():
            g = grads[name]
            m, v = self.m[name], self.v[name]
            m *= np.float32(c.beta1)
            m += np.float32(1.0 - c.beta1) * g
            v *= np.float32(c.beta2)
            v += np.float32(1.0 - c.beta2) * np.square(g)
            if c.weight_decay and p.ndim == 2:
                p *= np.float32(1.0 - lr * c.weight_decay)
            denom = np.sqrt(v / np.float32(correction2))
            denom += np.float32(c.eps)
            p -= step_size * m / denom
