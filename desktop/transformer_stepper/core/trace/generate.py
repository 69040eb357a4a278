"""Generation, one token at a time, and the logit lens: what a decoder does at inference.

A step: the next-token distribution from the last position's logits (temperature, top-k,
top-p), a choice (greedy or sampled with a seeded generator), and Model.extend, which computes
only the new position in every layer and reuses the cached keys and values."""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import lens_blocks
from ..model import ops
from ..model.errors import ModelError
from .lens_blocks import (
    LENS_BLOCK,
    Lens,
    TraceLens,
    best,
    cached_trace_lens,
    lens_logits,
    trace_lens)
from .model import Model
from .trace import Trace


@dataclass(frozen=True)
class Sampling:
    """temperature 0 = greedy; top_k 0 and top_p 1 = off; the same seed gives the same text."""
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not np.isfinite(self.temperature) or self.temperature < 0:
            raise ModelError(f"temperature must be 0 (greedy) or positive, got {self.temperature!r}")
        if type(self.top_k) is not int or self.top_k < 0:
            raise ModelError(f"top-k must be 0 (off) or a positive integer, got {self.top_k!r}")
        if not 0 < self.top_p <= 1:
            raise ModelError(f"top-p must be in (0, 1] (1 = off), got {self.top_p!r}")
        if type(self.seed) is not int or not 0 <= self.seed < 1 << 63:
            raise ModelError(f"seed must be a non-negative integer below 2**63, got {self.seed!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Distribution:
    """The next-token distribution of one step, before and after the cut-offs."""
    probabilities: np.ndarray    # [n_vocab] softmax(logits / T) (T = 1 when greedy)
    kept: np.ndarray             # [n_vocab] bool: inside top-k and top-p
    sampled: np.ndarray          # [n_vocab] the renormalised distribution the choice draws from


def finite_logits(logits: np.ndarray) -> np.ndarray:
    """[n_vocab] logits as float64 with NaN and ±Inf set to -inf: a token whose logit is not a
    number is never chosen (corrupt weights). A ModelError when none is finite: no token can be
    chosen, and none is made up."""
    values = np.asarray(logits, dtype=np.float64)
    finite = np.isfinite(values)
    if finite.all():
        return values
    if not finite.any():
        raise ModelError("every next-token logit is NaN or infinite (are the weights corrupt?); "
                         "no token can be chosen")
    return np.where(finite, values, -np.inf)


def distribution(logits: np.ndarray, sampling: Sampling) -> Distribution:
    # [n_vocab] logits of the last position -> the distribution a step chooses from. Shifted by
    # the largest before the division: a tiny temperature (1e-320) gives -inf, never NaN
    temperature = sampling.temperature or 1.0
    values = finite_logits(logits)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        scaled = (values - values.max()) / temperature
    scaled[np.isnan(scaled)] = -np.inf
    probabilities = ops.softmax(scaled)
    kept = np.ones(len(probabilities), dtype=bool)
    order = np.argsort(-probabilities, kind="stable")
    if sampling.top_k:
        kept[order[sampling.top_k:]] = False
    if sampling.top_p < 1:
        cumulative = np.cumsum(probabilities[order])
        # keep the smallest prefix whose mass reaches top_p (the first token always stays)
        cut = int(np.searchsorted(cumulative, sampling.top_p)) + 1
        kept[order[cut:]] = False
    sampled = np.where(kept, probabilities, 0.0)
    sampled /= sampled.sum()
    return Distribution(probabilities.astype(np.float32), kept, sampled)


def choose(logits: np.ndarray, sampling: Sampling, position: int) -> int:
    """The token for `position` from that position's predecessor's logits. Sampling draws from
    a generator seeded with (seed, position), so a token depends on the seed and where it
    goes, not on how the steps were grouped: ten steps at once, one at a time, or undone and
    redone give the same text."""
    if sampling.greedy:
        return int(np.argmax(finite_logits(logits)))
    dist = distribution(logits, sampling)
    rng = np.random.default_rng((sampling.seed, position))
    return int(rng.choice(len(dist.sampled), p=dist.sampled))


def step(model: Model, trace: Trace, sampling: Sampling = Sampling(),
         token: Optional[int] = None) -> Trace:
    """One generation step: choose the next token (or take `token`, the user's choice) and
    extend the trace by it, computing only the new position."""
    if not model.can_generate:
        raise ModelError(f"{model.name}: generation needs a causal model with an output head")
    if trace.n_seq >= model.config.n_ctx:
        raise ModelError(f"the context is full: the model reads at most {model.config.n_ctx} tokens")
    if token is None:
        token = choose(trace.logits_at(-1), sampling, trace.n_seq)
    return model.extend(trace, [token])


def generate(model: Model, trace: Trace, n_tokens: int, sampling: Sampling = Sampling(),
             stop_ids: tuple[int, ...] = ()) -> list[Trace]:
    """n_tokens steps from `trace`; -> the trace after each step (the last is the result).
    Stops early at a token in stop_ids or when the context is full."""
    steps: list[Trace] = []
    for _ in range(n_tokens):
        if trace.n_seq >= model.config.n_ctx:
            break
        trace = step(model, trace, sampling)
        steps.append(trace)
        if int(trace.input_ids[-1]) in stop_ids:
            break
    return steps


def lens(model: Model, trace: Trace, top: int = 5) -> Lens:
    """The whole logit lens, a block of positions of one hidden state at a time (LENS_BLOCK ·
    n_vocab floats at once), from the trace's lens cache (core/trace/lens_blocks.py: the blocks
    computed already, for the view or the prediction, or by an earlier trace with the same
    rows, are not computed again); kept with the trace (freed with it)."""
    cache = trace_lens(model, trace, top)
    cache.compute(cache.everything())
    return cache.assemble()


def lens_ready(trace: Trace) -> bool:
    return cached_lens(trace) is not None


def cached_lens(trace: Trace) -> Optional[Lens]:
    """The trace's whole lens if it has been computed (it needs the model's head to compute)."""
    cache = cached_trace_lens(trace)
    return cache.assemble() if cache is not None and cache.complete else None


def lens_applies(model, trace: Trace) -> bool:
    """The lens reads the model's own head and final norm: a one-stack model with an output
    head, and a trace it made (not an encoder–decoder's decoder)."""
    return isinstance(model, Model) and model.config.lm_head and trace.config is model.config


@dataclass(frozen=True)
class Predictions:
    """The most likely next tokens at every position: softmax(logits), best first."""
    ids: np.ndarray                  # [n_seq, top]
    probabilities: np.ndarray        # [n_seq, top]


_predictions_cache: "weakref.WeakKeyDictionary[Trace, Predictions]" = weakref.WeakKeyDictionary()
_lens_lock = threading.Lock()


def predictions(trace: Trace, top: int = 5, model: Optional[Model] = None) -> Predictions:
    """Every position's `top` most likely tokens, a block of positions at a time (the whole
    [n_seq, n_vocab] logits are never made). With the `model` the lens applies to, they are
    the lens's final hidden state, from the cache the lens shares (computed once for both);
    otherwise (an encoder–decoder's decoder) from the trace's logits, kept with the trace."""
    if not trace.has_logits:
        raise ModelError("the model has no output head: it predicts no tokens")
    if model is not None and lens_applies(model, trace):
        cache = trace_lens(model, trace, top)
        final = cache.n_states - 1
        cache.compute(cache.missing([final], range(cache.n_blocks)))
        return _final_predictions(cache, top)
    known = cached_predictions(trace)
    if known is not None and known.ids.shape[-1] >= top:
        return known
    top = min(top, trace.config.n_vocab)
    ids = np.empty((trace.n_seq, top), dtype=np.int64)
    probabilities = np.empty((trace.n_seq, top), dtype=np.float32)
    size = lens_blocks.LENS_BLOCK                    # (the lens's: a test sets it smaller)
    for first in range(0, trace.n_seq, size):
        rows = slice(first, min(first + size, trace.n_seq))
        block = trace.logits_at(rows)
        ids[rows], probabilities[rows] = best(ops.softmax(block, out=block if block.flags.writeable else None), top)
    result = Predictions(ids, probabilities)
    for value in (result.ids, result.probabilities):
        value.flags.writeable = False
    with _lens_lock:
        _predictions_cache[trace] = result
    return result


def _final_predictions(cache: TraceLens, top: int) -> Predictions:
    final = cache.n_states - 1
    blocks = [cache.blocks[(final, b)] for b in range(cache.n_blocks)]
    ids = np.concatenate([b.ids for b in blocks])[:, :top]
    probabilities = np.concatenate([b.probabilities for b in blocks])[:, :top]
    for value in (ids, probabilities):
        value.flags.writeable = False
    return Predictions(ids, probabilities)


def predictions_ready(trace: Trace, model: Optional[Model] = None) -> bool:
    if model is not None and lens_applies(model, trace):
        cache = cached_trace_lens(trace)
        return cache is not None and cache.ready([cache.n_states - 1], range(cache.n_blocks))
    return cached_predictions(trace) is not None


def cached_predictions(trace: Trace) -> Optional[Predictions]:
    with _lens_lock:
        return _predictions_cache.get(trace)


def logit_lens(model: Model, trace: Trace, top: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """-> (ids [n_layer + 1, n_seq, top], probabilities [n_layer + 1, n_seq, top]): each hidden
    state's most likely next tokens."""
    result = lens(model, trace, top)
    return result.ids[..., :top], result.probabilities[..., :top]
