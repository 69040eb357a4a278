"""The mixture-of-experts feed-forward (Mixtral, Qwen3-MoE, Qwen2-MoE, OLMoE, gpt-oss, DeepSeek-V2), one
pure function a step, in transformers' order:

    router_logits = x · W_router (+ b: gpt-oss)         [n_seq, n_expert]
    probs         = softmax(router_logits)              over every expert, in float32
    chosen, gates = top-k of probs                      [n_seq, k] (largest first)
    gates        /= Σ gates                             norm_topk (Mixtral always; Qwen3-MoE,
                                                        Qwen2-MoE, OLMoE when norm_topk_prob)
    gpt-oss (router_order "topk_softmax"): chosen = top-k of the logits, gates = softmax of
                                                        those k logits (the same numbers as the
                                                        normalised top-k of probs, in HF's order)
    gates        *= routed_scale                        DeepSeek-V2's routed_scaling_factor (its
                                                        group_limited_greedy: top-k among the best
                                                        groups' experts, group_limited)
    expert e      = down(silu(gate(x)) * up(x))         each token through its k experts only
                    gpt-oss (clamped_swiglu, biases): g = min(gate(x), limit),
                    u = clip(up(x), -limit, limit), down((u + 1) · g·sigmoid(alpha·g))
    out           = Σ_slot gates[:, slot] · expert_out[slot]
                  (+ sigmoid(x · w_shared_gate) · shared_expert(x): Qwen2-MoE)
                  (+ shared_experts(x), no gate: DeepSeek-V2)

Parameters (core/model/params.py): h.{i}.moe.router.w [d_model, n_expert] (+ router.b);
h.{i}.moe.expert.{e}.{gate,up}.w [d_model, d_expert], h.{i}.moe.expert.{e}.proj.w
[d_expert, d_model] (+ .b with mlp_bias); h.{i}.moe.shared.{gate,up,proj}.w and
h.{i}.moe.shared_gate.w [d_model, 1]. Only the experts some token is routed to are read: every
product goes through params.linear, so a GGUF's experts are multiplied straight from their
quantized blocks (io/gguf/compact.py: only the chosen experts' slices of the 3-D tensors are
decoded, in registers or tiles), and a lazy store widens only those.

Recorded (each layer of an MoE model): router_logits [n_seq, n_expert], router_probs (the
softmax over every expert, also where the gates come from the top-k logits alone),
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


def top_k(probs, k: int, normalize: bool, scale: float = 1.0):
    # [n_seq, n_expert] -> expert_ids [n_seq, k] int64 (largest probability first, ties to the
    # lower index as torch.topk on CPU), gates [n_seq, k]: their probabilities, divided by
    # their sum when `normalize`, times `scale` (DeepSeek's routed_scaling_factor)
    order = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    gates = np.take_along_axis(probs, order, axis=-1)
    if normalize:
        gates = gates / gates.sum(axis=-1, keepdims=True)
    if scale != 1.0:
        gates = gates * F32(scale)
    return order.astype(np.int64), gates.astype(F32, copy=False)


def top_k_logits(logits, k: int):
    # gpt-oss's order: [n_seq, n_expert] -> expert_ids [n_seq, k] (the k largest logits, largest
    # first), gates [n_seq, k]: the softmax of those k logits alone
    order = np.argsort(-logits, axis=-1, kind="stable")[:, :k]
    return order.astype(np.int64), chosen_softmax(logits, order)


def group_limited(probs, n_groups: int, keep: int):
    # [n_seq, n_expert] -> the same with every expert outside each token's `keep` best groups
    # set to 0 (DeepSeek-V2's group_limited_greedy: a group's score is its best expert's
    # probability; the top-k is then taken among the kept groups' experts)
    grouped = probs.reshape(len(probs), n_groups, -1)
    best = np.argsort(-grouped.max(axis=-1), axis=-1, kind="stable")[:, :keep]
    kept = np.zeros(grouped.shape[:2], dtype=bool)
    np.put_along_axis(kept, best, True, axis=-1)
    return np.where(kept[:, :, None], grouped, F32(0)).reshape(probs.shape)


def choose(probs, config: ModelConfig):
    # [n_seq, n_expert] probabilities -> (expert_ids, gates) as the config routes
    if config.n_expert_groups:
        probs = group_limited(probs, config.n_expert_groups, config.topk_groups)
    return top_k(probs, config.n_expert_used, config.norm_topk, config.routed_scale)


def chosen_softmax(logits, ids):
    # [n_seq, n_expert], [n_seq, k] -> [n_seq, k]: softmax over each token's chosen logits
    return ops.softmax(np.take_along_axis(logits, ids, axis=-1).astype(F32, copy=True))


def clamped_swiglu(gate, up, alpha: float, limit: float):
    # gpt-oss's expert activation, [n, d_expert] each: g = min(gate, limit), u = clip(up, ±limit),
    # (u + 1) · g · sigmoid(alpha · g)
    g = np.minimum(gate, F32(limit))
    u = np.clip(up, F32(-limit), F32(limit))
    return (u + F32(1)) * (g * (F32(1) / (F32(1) + np.exp(-F32(alpha) * g))))


def expert(params, prefix: str, x, config: Optional[ModelConfig] = None):
    # [n, d_model] -> [n, d_model]: one expert, SwiGLU down(silu(gate(x)) * up(x)); with a config
    # of clamped_swiglu / mlp_bias, gpt-oss's clamped form and the projections' biases
    bias = config is not None and config.mlp_bias and prefix.split(".")[-2] != "shared"

    def b(name):
        return params[prefix + name + ".b"] if bias else None

    gate = linear(params, prefix + "gate.w", x, b("gate"))
    up = linear(params, prefix + "up.w", x, b("up"))
    if config is not None and config.clamped_swiglu:
        hidden = clamped_swiglu(gate, up, config.swiglu_alpha, config.swiglu_limit)
    else:
        hidden = ops.silu(gate) * up
    return linear(params, prefix + "proj.w", hidden, b("proj"))


def expert_outputs(params, layer: int, x, expert_ids, config: Optional[ModelConfig] = None):
    # [n_seq, d_model], [n_seq, k] -> [k, n_seq, d_model]: slot s holds each token's s-th
    # chosen expert's output; every expert runs once, on the rows routed to it
    k = expert_ids.shape[1]
    out = np.zeros((k, len(x), x.shape[1]), dtype=F32)
    for e in np.unique(expert_ids):
        rows, slots = np.nonzero(expert_ids == e)
        out[slots, rows] = expert(params, f"h.{layer}.moe.expert.{int(e)}.", x[rows], config)
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


def shared_experts(params, layer: int, x):
    # [n_seq, d_model] -> [n_seq, d_model]: DeepSeek-V2's shared experts (one SwiGLU as wide as
    # n_shared_experts experts), added to every token's routed sum without a gate
    return expert(params, f"h.{layer}.moe.shared.", x)


def route(params, config: ModelConfig, x, layer: int, edits: Optional["RouterEdits"] = None):
    # Stage 10. [n_seq, d_model] -> (router_logits, probs, expert_ids, gates): the Router.
    # `edits` (interventions) disable experts or force tokens to one (RouterEdits below).
    p = f"h.{layer}.moe.router."
    logits = linear(params, p + "w", x, params[p + "b"] if config.router_bias else None)   # x · W_router (+ b)
    if edits is not None:
        return (logits,) + edits.route(logits, config)
    probs = router_probs(logits)
    if config.router_order == "topk_softmax":
        return (logits, probs) + top_k_logits(logits, config.n_expert_used)
    return (logits, probs) + choose(probs, config)


class RouterEdits:
    """One layer's router interventions (core/model/interventions.py DisableExpert, ForceExpert), as a
    forward hook on transformers' router recomputing its top-k from its logits would apply them:
    a disabled expert's logit is -inf before the softmax; a forced token's k-th choice is
    replaced by the expert (unless chosen already), its gate that expert's probability, then
    the k gates normalised where the model normalises. gpt-oss (router_order "topk_softmax"):
    the top-k of the edited logits, the forced expert in the k-th place, then the softmax over
    the k chosen logits, as its router computes them."""

    def __init__(self, disabled: frozenset, forced: dict) -> None:
        self.disabled, self.forced = disabled, dict(forced)

    def route(self, logits, config: ModelConfig):
        # [n_seq, n_expert] -> (probs, expert_ids, gates) as edited
        masked = logits.astype(F32, copy=True)
        masked[:, sorted(self.disabled)] = -np.inf
        probs = router_probs(masked)
        if config.router_order == "topk_softmax":
            ids, _ = top_k_logits(masked, config.n_expert_used)
        else:
            ids, _ = choose(probs, config.replace(norm_topk=False, routed_scale=1.0))
        for position, expert in self.forced.items():
            if position < len(ids) and expert not in ids[position]:
                ids[position, -1] = expert
        if config.router_order == "topk_softmax":
            return probs, ids, chosen_softmax(masked, ids)
        gates = np.take_along_axis(probs, ids, axis=-1)
        if config.norm_topk:
            gates = gates / gates.sum(axis=-1, keepdims=True)
        if config.routed_scale != 1.0:
            gates = gates * F32(config.routed_scale)
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
    outputs = expert_outputs(params, layer, x, ids, config)
    record("expert_outputs", outputs, layer)
    out = weighted_sum(gates, outputs)
    if config.d_shared_expert and not config.shared_expert_gate:
        shared = shared_experts(params, layer, x)
        record("shared_expert_out", shared, layer)
        out = out + shared
    elif config.d_shared_expert:
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
