"""Provenance of a mixture-of-experts layer's values (core/model/moe.py): the feed-forward output as
the gated sum of the token's chosen experts (each named with its gate), a router logit as x ·
W_router[:, e] (+ b_e: gpt-oss), and a gate as the softmax probability of its expert (divided by
the chosen ones' sum where the model normalises; gpt-oss: the softmax of the chosen logits)."""
from __future__ import annotations

import numpy as np

from .terms import Explanation, Names, Step, Term, traced_layer, format_number, linear


def explain_moe_output(model, trace, name: str, index: tuple) -> Explanation:
    # mlp_out[i, c] = Σ_slot gate[i, slot] · expert_out[slot, i, c] (+ σ(x·w) · shared[i, c])
    layer, i, c = index
    config, n = trace.config, Names(trace)
    ids, gates = traced_layer(trace, "expert_ids", layer)[i], traced_layer(trace, "expert_gates", layer)[i]
    outputs = traced_layer(trace, "expert_outputs", layer)[:, i, c]
    terms = [Term(f"E{int(e)}: gate {format_number(float(g))} · out", (float(g), float(o)), float(np.float64(g) * o))
             for e, g, o in zip(ids, gates, outputs)]
    python = (f"ids, gates = trace.layer('expert_ids', {layer})[{i}], trace.layer('expert_gates', {layer})[{i}]\n"
              f"value = sum(float(gates[s]) * float(trace.layer('expert_outputs', {layer})[s, {i}, {c}]) "
              f"for s in range(len(ids)))\n")
    formula = "out[c] = Σ over the chosen experts of gate_e · expert_e(x)[c]"
    if config.d_shared_expert and not config.shared_expert_gate:      # DeepSeek-V2: no gate
        shared = float(traced_layer(trace, "shared_expert_out", layer)[i, c])
        terms.append(Term("shared experts: out", (1.0, shared), shared))
        python += f"value += float(trace.layer('shared_expert_out', {layer})[{i}, {c}])\n"
        formula += " + shared(x)[c]"
    elif config.d_shared_expert:
        gate = float(traced_layer(trace, "shared_expert_gate", layer)[i, 0])
        shared = float(traced_layer(trace, "shared_expert_out", layer)[i, c])
        terms.append(Term(f"shared expert: σ {format_number(gate)} · out", (gate, shared), gate * shared))
        python += (f"value += float(trace.layer('shared_expert_gate', {layer})[{i}, 0]) * "
                   f"float(trace.layer('shared_expert_out', {layer})[{i}, {c}])\n")
        formula += " + σ(x · w_shared) · shared(x)[c]"
    total = float(sum(t.value for t in terms))
    notes = (f"token {n.token(i)} went to experts " + ", ".join(f"E{int(e)} (gate {float(g):.4f})"
                                                             for e, g in zip(ids, gates))
             + f" of {config.n_expert}; the others were not computed for it",)
    return Explanation(name, index, f"feed-forward output of token {n.token(i)}, dim {c}, layer {layer} "
                       f"(mixture of experts)", formula, {"gates": gates, "expert outputs": outputs},
                       tuple(terms), 0.0, len(terms), total, "Σ gate · expert", (Step("Σ", total),), total,
                       float(traced_layer(trace, name, layer)[i, c]), python, notes=notes)


def explain_router_logit(model, trace, name: str, index: tuple) -> Explanation:
    # router_logits[i, e] = x_i · W_router[:, e] (+ b_router[e])
    layer, i, e = index
    p = f"h.{layer}.moe.router.w"
    x = traced_layer(trace, "mlp_in", layer)[i]
    python = f"value = trace.layer('mlp_in', {layer})[{i}] @ model.params['{p}'][:, {e}]\n"
    bias, formula = None, "logit_e = x · W_router[:, e]"
    if trace.config.router_bias:
        bias = float(model.params[f"h.{layer}.moe.router.b"][e])
        python += f"value += model.params['h.{layer}.moe.router.b'][{e}]\n"
        formula += " + b_router[e]"
    return linear(name, index, f"router logit of token {Names(trace).token(i)} for expert {e}, layer {layer}",
                  formula, x, model.params[p][:, e], bias,
                  float(traced_layer(trace, name, layer)[i, e]), python, w_name="W_router", col=e)


def explain_gate(model, trace, name: str, index: tuple) -> Explanation:
    # expert_gates[i, s]: the softmax probability of the token's s-th expert (÷ Σ of the chosen)
    layer, i, s = index
    config = trace.config
    logits = traced_layer(trace, "router_logits", layer)[i].astype(np.float64)
    probs = traced_layer(trace, "router_probs", layer)[i].astype(np.float64)      # (as an edit left them)
    ids = traced_layer(trace, "expert_ids", layer)[i]
    e = int(ids[s])
    if config.router_order == "topk_softmax":
        return _chosen_softmax_gate(trace, name, index, logits, ids)
    steps = [Step(f"logit of E{e}", float(logits[e])),
             Step(f"p = softmax over {config.n_expert} experts, E{e}", float(probs[e]))]
    value = float(probs[e])
    formula = "gate = softmax(logits)[e]"
    if config.norm_topk:
        chosen = float(probs[ids].sum())
        value = value / chosen
        steps.append(Step(f"÷ Σ p of the {len(ids)} chosen = {format_number(chosen)}", value))
        formula += " / Σ over the chosen experts"
    if config.routed_scale != 1.0:                      # DeepSeek-V2's routed_scaling_factor
        value = value * config.routed_scale
        steps.append(Step(f"× routed_scaling_factor {config.routed_scale:g}", value))
        formula += f" × {config.routed_scale:g}"
    python = (f"p = trace.layer('router_probs', {layer})[{i}].astype('float64')\n"
              f"ids = trace.layer('expert_ids', {layer})[{i}]\nvalue = p[ids[{s}]]"
              + (" / p[ids].sum()" if config.norm_topk else "")
              + (f" * {config.routed_scale!r}" if config.routed_scale != 1.0 else "") + "\n")
    return Explanation(name, index, f"gate of token {Names(trace).token(i)}'s expert E{e} (choice {s}), "
                       f"layer {layer}", formula, {"probabilities": probs}, (), 0.0, 0, value, "",
                       tuple(steps), value, float(traced_layer(trace, name, layer)[i, s]), python)


def _chosen_softmax_gate(trace, name: str, index: tuple, logits: np.ndarray, ids: np.ndarray) -> Explanation:
    # gpt-oss: the top-k logits first, then the softmax over those k alone
    layer, i, s = index
    e = int(ids[s])
    chosen = logits[ids]
    top = float(chosen.max())
    total = float(np.exp(chosen - top).sum())
    value = float(np.exp(logits[e] - top) / total)
    steps = (Step(f"logit of E{e} (choice {s} of the top {len(ids)} logits)", float(logits[e])),
             Step("max of the chosen logits", top),
             Step(f"Σ over the {len(ids)} chosen of exp(logit − max)", total),
             Step(f"exp(logit of E{e} − max) / Σ", value))
    python = (f"import numpy as np\nl = trace.layer('router_logits', {layer})[{i}].astype('float64')\n"
              f"ids = trace.layer('expert_ids', {layer})[{i}]\n"
              f"e = np.exp(l[ids] - l[ids].max())\nvalue = e[{s}] / e.sum()\n")
    notes = ("the other experts' logits take no part: the softmax runs over the chosen ones only "
             "(the same numbers as softmax over every expert, divided by the chosen ones' sum)",)
    return Explanation(name, index, f"gate of token {Names(trace).token(i)}'s expert E{e} (choice {s}), "
                       f"layer {layer}", "gate = softmax(top-k logits)[choice]", {"chosen logits": chosen},
                       (), 0.0, 0, value, "", steps, value, float(traced_layer(trace, name, layer)[i, s]), python,
                       notes=notes)
