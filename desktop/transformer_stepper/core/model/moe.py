"""The mixture-of-experts feed-forward (Mixtral, Qwen3-MoE, Qwen2-MoE, OLMoE), one small pure
function a step, in transformers' order:

    router_logits = x · W_router                        [n_seq, n_expert]
    probs         = softmax(router_logits)              over every expert, in float32
    chosen, gates = top-k of probs                      [n_seq, k] (largest first)
    gates        /= Σ gates                             norm_topk (Mixtral always; Qwen3-MoE,
                                                        Qwen2-MoE, OLMoE when norm_topk_prob)
    expert e      = down(silu(gate(x)) * up(x))         each token through its k experts only
    out           = Σ_slot gates[:, slot] · expert_out[slot]
                  (+ sigmoid(x · w_shared_gate) · shared_expert(x): Qwen2-MoE)

Parameters (core/model/params.py): h.{i}.moe.router.w [d_model, n_expert];
h.{i}.moe.expert.{e}.{gate,up}.w [d_model, d_expert], h.{i}.moe.expert.{e}.proj.w
[d_expert, d_model]; h.{i}.moe.shared.{gate,up,proj}.w and h.{i}.moe.shared_gate.w
[d_model, 1]. Only the experts some token is routed to are read: every product goes through
params.linear, so a GGUF's experts are multiplied straight from their quantized blocks
(io/gguf/compact.py: only the chosen experts' slices of the 3-D tensors are decoded, in
registers or tiles), and a lazy store widens only those.

Recorded (each layer of an MoE model): router_logits [n_seq, n_expert], router_probs,
expert_ids [n_seq, k] (int64), expert_gates [n_seq, k] (these three also kept for every layer
by the pass: the experts' load over the text and a token's path need every layer's), expert_outputs
[k, n_seq, d_model] (slot s: each token's s-th chosen expert's output, before its gate),
shared_expert_out, shared_expert_gate [n_seq, 1], mlp_out. A dense layer of an MoE model records
them as [n_seq, 0] (no router), so the per-layer lists stay one entry a layer."""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import ops
from .params import linear
from .config import ModelConfig

F32 = np.float32


def router_probs(logits):
    # [n_seq, n_expert] -> softmax over every expert (transformers: before the top-k)
    return ops.softmax(logits.astype(F32, copy=True))


def top_k(probs, k: int, normalize: bool):
    # [n_seq, n_expert] -> expert_ids [n_seq, k] int64 (largest probability first, ties to the
    # lower index as torch.topk on CPU), gates [n_seq, k]: their probabilities, divided by
    # their sum when `normalize`
    order = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    gates = np.take_along_axis(probs, order, axis=-1)
    if normalize:
        gates = gates / gates.sum(axis=-1, keepdims=True)
    return order.astype(np.int64), gates.astype(F32, copy=False)


def expert(params, prefix: str, x):
    # [n, d_model] -> [n, d_model]: one expert, SwiGLU down(silu(gate(x)) * up(x))
    hidden = ops.silu(linear(params, prefix + "gate.w", x, None)) * linear(params, prefix + "up.w", x, None)
    return linear(params, prefix + "proj.w", hidden, None)


def expert_outputs(params, layer: int, x, expert_ids):
    # [n_seq, d_model], [n_seq, k] -> [k, n_seq, d_model]: slot s holds each token's s-th
    # chosen expert's output; every expert runs once, on the rows routed to it
    k = expert_ids.shape[1]
    out = np.zeros((k, len(x), x.shape[1]), dtype=F32)
    for e in np.unique(expert_ids):
        rows, slots = np.nonzero(expert_ids == e)
        out[slots, rows] = expert(params, f"h.{layer}.moe.expert.{int(e)}.", x[rows])
    return out


def weighted_sum(gates, outputs):
    # [n_seq, k], [k, n_seq, d_model] -> [n_seq, d_model]: Σ_slot gate · expert output
    total = outputs[0] * gates[:, 0, None]
    for slot in range(1, outputs.shape[0]):
        total += outputs[slot] * gates[:, slot, None]
    return total


def shared_expert(params, layer: int, x):
    # [n_seq, d_model] -> (output [n_seq, d_model], gate [n_seq, 1]): Qwen2-MoE's expert every
    # token passes through, scaled by sigmoid(x · w_gate)
    p = f"h.{layer}.moe."
    logit = linear(params, p + "shared_gate.w", x, None)
    return expert(params, p + "shared.", x), F32(1) / (F32(1) + np.exp(-logit))


def route(params, config: ModelConfig, x, layer: int, edits: Optional["RouterEdits"] = None):
    # Stage 10. [n_seq, d_model] -> (router_logits, probs, expert_ids, gates): the Router.
    # `edits` (interventions) disable experts or force tokens to one (RouterEdits below).
    logits = linear(params, f"h.{layer}.moe.router.w", x, None)     # [n_seq, n_expert]: x · W_router
    if edits is not None:
        return (logits,) + edits.route(logits, config.n_expert_used, config.norm_topk)
    probs = router_probs(logits)
    return (logits, probs) + top_k(probs, config.n_expert_used, config.norm_topk)


class RouterEdits:
    """One layer's router interventions (core/model/interventions.py DisableExpert, ForceExpert), as a
    forward hook on transformers' router recomputing its top-k from its logits would apply them:
    a disabled expert's logit is -inf before the softmax; a forced token's k-th choice is
    replaced by the expert (unless chosen already), its gate that expert's probability, then
    the k gates normalised where the model normalises."""

    def __init__(self, disabled: frozenset, forced: dict) -> None:
        self.disabled, self.forced = disabled, dict(forced)

    def route(self, logits, k: int, normalize: bool):
        # [n_seq, n_expert] -> (probs, expert_ids, gates) as edited
        masked = logits.astype(F32, copy=True)
        masked[:, sorted(self.disabled)] = -np.inf
        probs = router_probs(masked)
        ids, _ = top_k(probs, k, normalize=False)
        for position, expert in self.forced.items():
            if position < len(ids) and expert not in ids[position]:
                ids[position, -1] = expert
        gates = np.take_along_axis(probs, ids, axis=-1)
        if normalize:
            gates = gates / gates.sum(axis=-1, keepdims=True)
        return probs, ids, gates.astype(F32, copy=False)


def feed_forward(params, config: ModelConfig, x, layer: int, record,
                 edits: Optional[RouterEdits] = None) -> np.ndarray:
    # an MoE layer's feed-forward (the Router, then the chosen experts: forward.feed_forward
    # calls it). [n_seq, d_model] -> [n_seq, d_model]
    record("mlp_in", x, layer)
    logits, probs, ids, gates = route(params, config, x, layer, edits)
    for name, value in (("router_logits", logits), ("router_probs", probs), ("expert_ids", ids),
                        ("expert_gates", gates)):
        record(name, value, layer)
    outputs = expert_outputs(params, layer, x, ids)
    record("expert_outputs", outputs, layer)
    out = weighted_sum(gates, outputs)
    if config.d_shared_expert:
        shared, shared_gate = shared_expert(params, layer, x)
        record("shared_expert_out", shared, layer)
        record("shared_expert_gate", shared_gate, layer)
        out = out + shared_gate * shared
    record("mlp_out", out, layer)
    return out


def no_router(x: np.ndarray) -> dict[str, np.ndarray]:
    # a dense layer of an MoE model: [n_seq, 0] entries of the per-layer router lists
    return {"router_logits": np.zeros((len(x), 0), dtype=F32),
            "expert_ids": np.zeros((len(x), 0), dtype=np.int64),
            "expert_gates": np.zeros((len(x), 0), dtype=F32)}


def load(expert_ids: np.ndarray, n_expert: int, rows: Optional[np.ndarray] = None) -> np.ndarray:
    # [n_seq, k] -> [n_expert] how many of the tokens (those of `rows`, or all) chose each expert
    ids = expert_ids if rows is None else expert_ids[rows]
    return np.bincount(ids.ravel(), minlength=n_expert).astype(np.int64)
