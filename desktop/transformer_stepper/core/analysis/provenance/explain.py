"""Where does this number come from? Any traced value, taken apart into the arithmetic that made
it, with the actual numbers.

    from transformer_stepper.core.analysis.provenance.explain import explain
    e = explain(model, trace, "scores", (layer, head, i, j))
    e.terms        # the largest products q[c]·k[c], by |term|; e.rest: the others summed
    e.steps        # Σ terms, ÷ √d_head, + mask: every step's value, the last one is e.value
    e.value        # recomputed here (float64 sums of the trace's float32 operands)
    e.traced       # the trace's own value: equal to e.value to float rounding
    exec(e.python, {"model": model, "trace": trace})   # sets `value`: the same number

Nothing here is a second forward pass: each explanation reads the operands the trace recorded
(q, k, weights, v, the norm's input...) and the parameters the forward pass read, and redoes
one scalar's arithmetic. An address is a trace array's name and its indices: per-layer arrays
`(layer, *index into trace.layer(name, layer))`, whole-model ones `trace[name][index]`
(docs/cli.md "Trace arrays"); a weight is "param:NAME" with its index into model.params[NAME] (a
quantized weight's block arithmetic, core/analysis/provenance/params.py). Names that are another array under a second name (layer_out,
attn_in, mlp_in, hidden_states, heads_concat) are explained as that array."""
from __future__ import annotations

from typing import Callable

from .attention import (
    explain_head_output,
    explain_heads_concat,
    explain_projection,
    explain_score,
    explain_sink_weight,
    explain_weight)
from .dense import (
    explain_activation,
    explain_embedding_sum,
    explain_logit,
    explain_lookup,
    explain_mlp_pre,
    explain_norm,
    explain_output_linear,
    explain_residual)
from .moe import explain_gate, explain_moe_output, explain_router_logit
from .params import PARAM, explain_parameter
from .terms import Explanation, Step, Term

Explainer = Callable[..., Explanation]

KINDS: dict[str, Explainer] = {
    "scores": explain_score, "scores_raw": explain_score, "scores_uncapped": explain_score,
    "attn_weights": explain_weight, "sink_weights": explain_sink_weight,
    "head_outputs": explain_head_output, "heads_concat": explain_heads_concat,
    "q": explain_projection, "k": explain_projection, "v": explain_projection,
    "q_unrotated": explain_projection, "k_unrotated": explain_projection,
    "attn_out": explain_output_linear, "mlp_out": lambda *a: _feed_forward_output(*a),
    "router_logits": explain_router_logit, "expert_gates": explain_gate,
    "mlp_pre_act": explain_mlp_pre, "mlp_up": explain_mlp_pre,
    "mlp_act": explain_activation, "mlp_gated": explain_activation,
    "ln_1_out": explain_norm, "ln_1_normalized": explain_norm, "ln_2_out": explain_norm,
    "ln_2_normalized": explain_norm, "post_attn_ln_out": explain_norm,
    "post_attn_ln_normalized": explain_norm, "post_mlp_ln_out": explain_norm,
    "post_mlp_ln_normalized": explain_norm, "final_ln_out": explain_norm, "final_ln_normalized": explain_norm,
    "embedding_output": explain_norm, "embedding_ln_normalized": explain_norm,
    "attn_residual": explain_residual, "mlp_residual": explain_residual,
    "embedding_sum": explain_embedding_sum, "token_embeddings": explain_lookup,
    "token_embeddings_scaled": explain_lookup, "position_embeddings": explain_lookup,
    "logits": explain_logit,
    # an encoder–decoder's decoder: cross-attention (its k and v are the encoder output's)
    "cross_scores": explain_score, "cross_scores_raw": explain_score, "cross_attn_weights": explain_weight,
    "cross_head_outputs": explain_head_output, "cross_heads_concat": explain_heads_concat,
    "cross_q": explain_projection, "cross_attn_out": explain_output_linear, "cross_residual": explain_residual,
    "ln_cross_out": explain_norm, "ln_cross_normalized": explain_norm,
}


def _feed_forward_output(model, trace, name: str, index: tuple) -> Explanation:
    # an MoE layer's output is the gated sum of its experts (core/analysis/provenance/moe.py)
    if trace.config.is_moe_layer(index[0]):
        return explain_moe_output(model, trace, name, index)
    return explain_output_linear(model, trace, name, index)


ALIASES = ("layer_out", "attn_in", "mlp_in", "hidden_states", "layer_in", "cross_attn_in")


def resolve(trace, name: str, index: tuple) -> tuple[str, tuple]:
    """The array that computed this value: aliases followed to the arithmetic's own name."""
    config = trace.config
    if name == "hidden_states":
        k, *rest = index
        if k == 0:
            return resolve(trace, "embedding_output", tuple(rest))
        if k == config.n_layer and "final_ln_out" in trace.arrays:
            return "final_ln_out", tuple(rest)
        return resolve(trace, "layer_out", (k - 1, *rest))
    if name == "layer_in":
        layer, *rest = index
        return resolve(trace, "hidden_states", (layer, *rest)) if layer else \
            resolve(trace, "embedding_output", tuple(rest))
    if name == "layer_out":
        return ("ln_2_out" if config.norm == "post" else "mlp_residual"), index
    if name == "cross_attn_in":                   # an encoder–decoder's decoder block
        return ("ln_cross_out" if config.norm == "pre" else "ln_1_out"), index
    if name == "attn_in":
        return ("ln_1_out", index) if config.norms_branch_input else resolve(trace, "layer_in", index)
    if name == "mlp_in":
        if config.norm == "branch_out":            # OLMo 2: the stream itself
            return "attn_residual", index
        if config.norm == "post" and "cross_residual" in trace.layer_names():
            return "ln_cross_out", index           # a post-LN decoder block: after cross-attention
        return ("ln_2_out" if config.norms_branch_input else "ln_1_out"), index
    if name == "embedding_output" and not config.embed_norm:
        for source in ("embedding_sum", "token_embeddings_scaled", "token_embeddings"):
            if source in trace.arrays:
                return source, index
    return name, index


def explainable(trace) -> list[str]:
    """The names this trace's values can be explained for."""
    names = [name for name in (*KINDS, *ALIASES) if name in trace]
    return names + (["hidden_states"] if "hidden_states" not in names else [])


def explain(model, trace, name: str, index) -> Explanation:
    """The arithmetic behind `trace`'s value `name[index]` (see the module docstring). Raises
    KeyError for a name that is not explained, IndexError for an index outside the array."""
    index = tuple(int(k) for k in index)
    if name.startswith(PARAM):                 # a weight: "param:h.0.attn.q.w"
        return explain_parameter(model, trace, name, index)
    _check(trace, name, index)
    name, index = resolve(trace, name, index)
    if name not in KINDS:
        raise KeyError(f"no provenance for {name!r} (explained: {', '.join(sorted(KINDS))})")
    _check(trace, name, index)
    return KINDS[name](model, trace, name, index)


def _check(trace, name: str, index: tuple) -> None:
    if name == "hidden_states":
        shape = (trace.config.n_layer + 1, trace.n_seq, trace.config.d_model)
    elif name in trace.arrays:
        shape = trace.arrays[name].shape
    elif name == "logits" and trace.has_logits:
        shape = (trace.n_seq, trace.config.n_vocab)
    elif name in trace.residual or name in trace.layer_names():
        if not index or not 0 <= index[0] < trace.config.n_layer:
            raise IndexError(f"{name}: layer {index[0] if index else '?'} is out of range "
                             f"(the model has {trace.config.n_layer})")
        shape = (trace.config.n_layer, *trace.layer(name, index[0]).shape)
    else:
        raise KeyError(f"the trace has no array named {name!r}")
    if len(index) != len(shape) or any(not 0 <= k < n for k, n in zip(index, shape)):
        raise IndexError(f"{name}: index {index} is outside the shape {tuple(shape)}")


__all__ = ["explain", "explainable", "resolve", "Explanation", "Step", "Term", "KINDS"]
