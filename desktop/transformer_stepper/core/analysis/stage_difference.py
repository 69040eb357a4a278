"""One stage of two models' passes over the same text, as the Stepper's "A − B" mode shows it:
for each array the stage computes (`Stage.computes`, the arrays the interventions' difference
map compares), at the layer and head shown, the difference A − B of the two exact traces and
its size measured as the interventions measure theirs (core/analysis/differences.py, with B
in the place of the clean pass: ‖A − B‖ / ‖B‖ and max |A − B|); where a difference means
nothing (token ids, the experts a router chose, the most likely tokens) the two side by side.

    shown = stage_difference(trace_a, trace_b, "softmax", layer=2, head=5)
    for item in shown.items: ...   # Delta (item.delta == a − b) or Pair (item.a, item.b)

Pure numpy over two traces of the same token ids (core/analysis/model_diff.py refuses others):
no second copy of any stage's arithmetic, only subtraction."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from ..model import stages as stages_lib
from ..trace.layer_detail import PER_HEAD
from . import differences, model_diff
from .moe_readouts import gate_matrix

TOP_PER_POSITION = 5          # the most likely tokens shown side by side per position
LOGIT_BLOCK = 64              # positions of logits read at a time


@dataclass(frozen=True)
class Delta:
    """A − B of one array ([rows, cols]: a per-head array is the head shown), NaN where both
    are −∞ or the mask blocks the entry (masked scores). `size` is the interventions' measure with B as the clean pass."""
    name: str
    delta: np.ndarray
    size: differences.Difference


@dataclass(frozen=True)
class Pair:
    """A's and B's values side by side ([rows, cols] each) where their difference means
    nothing; `ids_a` / `ids_b`: token or expert ids naming the cells (None: the values)."""
    name: str
    a: np.ndarray
    b: np.ndarray
    ids_a: Optional[np.ndarray] = None
    ids_b: Optional[np.ndarray] = None


@dataclass(frozen=True)
class PerPosition:
    """A figure per position computed from both (KL, top-1 agreement)."""
    name: str
    values: np.ndarray       # [n_seq]


Item = Union[Delta, Pair, PerPosition]


@dataclass(frozen=True)
class StageDifference:
    stage: str
    layer: Optional[int]     # None: a stage that runs once
    head: Optional[int]      # None: not a per-head stage
    items: tuple[Item, ...]

    def item(self, name: str) -> Item:
        return next(i for i in self.items if i.name == name)

    @property
    def deltas(self) -> tuple[Delta, ...]:
        return tuple(i for i in self.items if isinstance(i, Delta))


def delta(name: str, layer: Optional[int], a: np.ndarray, b: np.ndarray,
          ignore: Optional[np.ndarray] = None) -> Delta:
    """A − B in A's dtype (a float32 trace: the float32 subtraction of the two), with its size."""
    a, b = np.asarray(a), np.asarray(b)
    size = differences.compare(name, layer, b, a, ignore)
    with np.errstate(invalid="ignore"):
        value = np.subtract(a, b)
    if np.issubdtype(value.dtype, np.floating):
        masked = ~np.isfinite(a) & ~np.isfinite(b) & (a == b)
        if ignore is not None:               # raw scores the mask blocks: computed, never used
            masked |= ignore
        value = np.where(masked, np.nan, value).astype(value.dtype, copy=False)
    return Delta(name, value, size)


def _two_d(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, 1) if x.ndim == 1 else x


def stage_difference(trace_a, trace_b, stage_key: str, layer: int = 0, head: int = 0) -> StageDifference:
    """What the stage `stage_key` computes at `layer` / `head` (ignored where it does not
    apply), A against B. Reads that layer's detail of both traces (compute it in a worker)."""
    model_diff.check_same_tokens(trace_a.input_ids, trace_a.tokens, trace_b.input_ids, trace_b.tokens)
    stage = stages_lib.stage(stage_key)
    if stage_key == "tokenize":
        return StageDifference(stage_key, None, None, (_ids_pair(trace_a, trace_b),))
    if stage_key == "prediction":
        return StageDifference(stage_key, None, None, _prediction(trace_a, trace_b))
    if not stage.per_layer:
        items = tuple(delta(name, None, _two_d(trace_a.arrays[name]), _two_d(trace_b.arrays[name]))
                      for name in stage.computes if name in trace_a.arrays and name in trace_b.arrays)
        return StageDifference(stage_key, None, None, items)
    if stage_key == "router":
        return StageDifference(stage_key, layer, None, _router(trace_a, trace_b, layer))
    detail_a, detail_b = trace_a.detail(layer), trace_b.detail(layer)
    items = []
    for name in stage.computes:
        if name not in detail_a or name not in detail_b or name == "expert_outputs":
            continue        # (expert_outputs: the k-th chosen expert's; the Router compares the choices)
        if name in PER_HEAD:           # the head shown only: a derived array (scores) is never made whole
            ignore = trace_a.layer_mask(layer) if name in ("scores_raw", "scores") else None
            items.append(delta(name, layer, trace_a.head_array(name, layer, head),
                               trace_b.head_array(name, layer, head), ignore))
        elif detail_a[name].size:      # (a dense layer of an MoE model keeps an empty router entry)
            items.append(delta(name, layer, _two_d(detail_a[name]), _two_d(detail_b[name])))
    if stage_key == "feed_forward" and "layer_out" in detail_a:
        items.append(delta("layer_out", layer, detail_a["layer_out"], detail_b["layer_out"]))
    return StageDifference(stage_key, layer, head if stage.per_head else None, tuple(items))


def _ids_pair(trace_a, trace_b) -> Pair:
    # the ids name the cells; the value is 1 where the two agree (always, once compared)
    ids_a, ids_b = np.asarray(trace_a.input_ids)[:, None], np.asarray(trace_b.input_ids)[:, None]
    agree = (ids_a == ids_b).astype(np.float64)
    return Pair("input_ids", agree, agree.copy(), ids_a, ids_b)


def _router(trace_a, trace_b, layer: int) -> tuple[Item, ...]:
    config = trace_a.config
    if not config.is_moe_layer(layer):
        return ()
    items = [delta(name, layer, trace_a.layer(name, layer), trace_b.layer(name, layer))
             for name in ("router_logits", "router_probs")]
    ids_a, ids_b = trace_a.layer("expert_ids", layer), trace_b.layer("expert_ids", layer)
    gates_a, gates_b = trace_a.layer("expert_gates", layer), trace_b.layer("expert_gates", layer)
    # each token's gate on every expert (0: not chosen): a difference that means something
    # even where the two chose different experts
    items.append(delta("expert_gates", layer, gate_matrix(ids_a, gates_a, config.n_expert),
                       gate_matrix(ids_b, gates_b, config.n_expert)))
    items.append(Pair("expert_ids", gates_a, gates_b, ids_a, ids_b))
    return tuple(items)


def _prediction(trace_a, trace_b) -> tuple[Item, ...]:
    items: list[Item] = []
    if "final_ln_out" in trace_a.arrays and "final_ln_out" in trace_b.arrays:
        items.append(delta("final_ln_out", None, trace_a.arrays["final_ln_out"], trace_b.arrays["final_ln_out"]))
    if trace_a.has_logits and trace_b.has_logits:
        output = model_diff.traces_output_drift(trace_a, trace_b)
        items.append(PerPosition("kl", output.kl_at))
        (ids_a, probs_a), (ids_b, probs_b) = _top(trace_a), _top(trace_b)
        items.append(Pair("top_tokens", probs_a, probs_b, ids_a, ids_b))
    return tuple(items)


def _top(trace) -> tuple[np.ndarray, np.ndarray]:
    """[n_seq, TOP_PER_POSITION] the most likely ids per position and their probabilities."""
    n, k = trace.n_seq, TOP_PER_POSITION
    ids, probs = np.empty((n, k), np.int64), np.empty((n, k), np.float64)
    for start in range(0, n, LOGIT_BLOCK):
        rows = slice(start, min(start + LOGIT_BLOCK, n))
        logits = trace.logits_at(rows).astype(np.float64)
        shifted = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(shifted)
        p /= p.sum(axis=1, keepdims=True)
        top = np.argsort(-p, axis=1, kind="stable")[:, :k]
        ids[rows], probs[rows] = top, np.take_along_axis(p, top, axis=1)
    return ids, probs
