"""Provenance of the attention arrays: scores, weights, head outputs, and q, k, v (with the
head's RMSNorm and the rotary rotation where the model has them)."""
from __future__ import annotations

import numpy as np

from ...model.interventions import head_edits
from ...model.score_terms import score_bias, score_terms
from .latent import explain_latent_projection
from .terms import (
    Explanation,
    Names,
    Step,
    traced_head,
    traced_layer,
    format_number,
    largest_terms,
    linear)


# -- scores, weights, head outputs -------------------------------------------------------------
def split_name(name: str) -> tuple[str, str]:
    """'cross_scores' -> ('cross_', 'scores'): an encoder–decoder's cross-attention arrays are
    the self-attention's names with a prefix (core/model/seq2seq.py)."""
    return ("cross_", name[len("cross_"):]) if name.startswith("cross_") else ("", name)


def _edits(trace, prefix: str, layer: int):
    # (ablations, temperatures) of the attention the prefix names, in this layer
    edits = getattr(trace, "cross_interventions", ()) if prefix else trace.interventions
    return head_edits(edits, layer)


def _QK(c: int) -> str:
    return f"q[{c}] · k[{c}]"


def explain_score(model, trace, name: str, index: tuple) -> Explanation:
    layer, head, i, j = index
    config, n = trace.config, Names(trace)
    prefix, base = split_name(name)
    q, k = traced_head(trace, prefix + "q", layer, head)[i], traced_head(trace, prefix + "k", layer, head)[j]
    products = q.astype(np.float64) * k
    terms, rest, total = largest_terms(products, _QK, lambda c: (q[c], k[c]))
    score = score_terms(trace, prefix)
    scale = score.scale
    scale_label = (f"query_pre_attn_scalar^-1/2 = {config.query_scale:g}^-1/2" if config.query_scale
                   else f"mscale²/√d_head = {config.attn_mscale:.4g}²/√{config.d_head}" if config.attn_mscale != 1.0
                   else f"1/√d_head = 1/√{config.d_head}")
    scaled = float(np.float32(total) * np.float32(scale))
    steps = [Step("q·k (Σ terms)", total)]
    value = total
    mask = None if prefix else trace.layer_attention_mask(layer)   # cross: every source key
    cap = config.attn_softcap
    python = (f"import numpy as np\n"
              f"q = trace.layer('{prefix}q', {layer})[{head}, {i}]\n"
              f"k = trace.layer('{prefix}k', {layer})[{head}, {j}]\n"
              f"value = q @ k\n")
    formula = "q_i·k_j"
    if base != "scores_raw" and scale == 1.0:
        steps.append(Step("not scaled (T5 folds 1/√d_head into its weights)", value))
    elif base != "scores_raw":
        steps.append(Step(f"× {scale_label} = {scale:.6g}", scaled))
        value = scaled
        python += f"value = value * {scale!r}   # {scale_label}\n"
        formula = "q_i·k_j · scale"
    bias = score_bias(trace, prefix, head) if base == "scores" else None
    if bias is not None:
        value = float(np.float32(value) + np.float32(bias[i, j]))
        steps.append(Step(f"+ {score.bias_label} of (query {i}, key {j}) = {float(bias[i, j]):.6g}", value))
        python += f"value = value + trace['{score.bias_name}'][{head}, {i}, {j}]   # {score.bias_label}\n"
        formula += " + bias_ij"
    if base == "scores" and cap:
        value = float(cap * np.tanh(value / cap))
        steps.append(Step(f"soft-cap: {cap:g} · tanh(s / {cap:g})", value))
        python += f"value = {cap!r} * np.tanh(value / {cap!r})   # attn_logit_softcapping\n"
        formula = f"{cap:g}·tanh({formula} / {cap:g})"
    if base == "scores" and mask is not None:
        blocked = float(mask[i, j])
        value = value + blocked
        why = "key outside the query's window" if config.is_local(layer) and i - j >= config.sliding_window \
            else "key after the query"
        steps.append(Step("+ mask (" + (f"−∞: {why}" if np.isneginf(blocked) else "0: allowed") + ")", value))
        python += (f"value += trace.layer_attention_mask({layer})[{i}, {j}]   # 0, or -inf where blocked\n")
        formula += " + mask_ij"
    traced = float(traced_head(trace, name, layer, head)[i, j])
    notes = []
    if config.has_rope(layer) and "rope_angles" in trace.arrays:
        notes.append("q and k are after the rotary rotation (q_unrotated, k_unrotated before it)")
    elif config.position == "rotary":
        notes.append(f"layer {layer} has no rotary (a NoPE layer): q and k carry no position")
    if config.group_size > 1:
        notes.append(f"k comes from K/V head {config.kv_head_of(head)}, shared by "
                     f"{config.group_size} query heads")
    if config.local_layers:
        notes.append(f"layer {layer} is {'local (window ' + str(config.sliding_window) + ')' if config.is_local(layer) else 'global'}")
    title = (f"{'cross-attention ' if prefix else ''}{'raw score' if base == 'scores_raw' else 'score'} "
             f"of query {n.token(i)} for key {j if prefix else n.token(j)}, layer {layer}, head {head}")
    return Explanation(name, index, title, formula, {"q_i": q, "k_j": k}, terms, rest, len(q), total,
                       "q·k", tuple(steps), float(value), traced, python, notes=tuple(notes),
                       summands=products, summand_label=_QK)


def _sinks(model, trace, prefix: str, layer: int):
    # [n_head] the layer's attention sink logits (gpt-oss), or None
    return model.params[f"h.{layer}.attn.sinks"] if trace.config.attn_sinks and not prefix else None


def explain_weight(model, trace, name: str, index: tuple) -> Explanation:
    layer, head, i, j = index
    n = Names(trace)
    prefix, _ = split_name(name)
    keys = _key_names(model, trace, prefix)
    scores = traced_head(trace, prefix + "scores", layer, head)[i].astype(np.float64)
    temperature = _edits(trace, prefix, layer)[1].get(head)
    sinks = _sinks(model, trace, prefix, layer)
    sink = None if sinks is None else float(sinks[head]) / (temperature or 1.0)
    shown = scores / temperature if temperature else scores
    top = float(np.max(shown)) if sink is None else max(float(np.max(shown)), sink)
    exps = np.exp(shown - top)                           # exp(-inf) = 0 for masked keys
    terms, rest, total = largest_terms(exps, lambda k: f"exp(s_i{k} − max) ('{keys[k]}')",
                                lambda k: (shown[k] - top,))
    t = f" / {temperature:g}" if temperature else ""
    python = (f"import numpy as np\n"
              f"s = trace.layer('{prefix}scores', {layer})[{head}, {i}]{t}   # the query's row\n")
    notes = (f"a HeadTemperature intervention divides this head's scores by T = {temperature:g}",) if temperature else ()
    if sink is None:
        steps = [Step(f"s_ij{' / T' if temperature else ''}", float(shown[j])),
                 Step("max over the row", top),
                 Step("exp(s_ij − max)", float(exps[j])),
                 Step("Σ_k exp(s_ik − max) (Σ terms)", total),
                 Step("exp(s_ij − max) / Σ", float(exps[j] / total))]
        python += "e = np.exp(s - s.max())\nvalue = e[%d] / e.sum()\n" % j
        formula = "w_ij = exp(s_ij − max_k s_ik) / Σ_k exp(s_ik − max_k s_ik)"
    else:
        sink_term = float(np.exp(sink - top))
        denominator = total + sink_term
        steps = [Step(f"s_ij{' / T' if temperature else ''}", float(shown[j])),
                 Step(f"head {head}'s sink logit{' / T' if temperature else ''}", sink),
                 Step("max over the row and the sink", top),
                 Step("exp(s_ij − max)", float(exps[j])),
                 Step("Σ_k exp(s_ik − max) (Σ terms)", total),
                 Step("+ exp(sink − max): the sink's part, no key's", denominator),
                 Step("exp(s_ij − max) / (Σ + exp(sink − max))", float(exps[j] / denominator))]
        python += (f"sink = float(model.params['h.{layer}.attn.sinks'][{head}]){t}   # the head's sink logit\n"
                   f"top = max(s.max(), sink)\n"
                   f"value = np.exp(s[{j}] - top) / (np.exp(s - top).sum() + np.exp(sink - top))\n")
        formula = "w_ij = exp(s_ij − m) / (Σ_k exp(s_ik − m) + exp(sink_h − m)),  m = max(max_k s_ik, sink_h)"
        notes += (f"the sink took {sink_term / denominator:.4f} of this row: the weights sum to "
                  f"{total / denominator:.4f}, not 1",)
    traced = float(traced_head(trace, name, layer, head)[i, j])
    return Explanation(name, index, f"{'cross-attention' if prefix else 'attention'} weight of query "
                       f"{n.token(i)} on key {j} '{keys[j]}', layer {layer}, head {head}",
                       formula, {"scores of the row": scores}, terms, rest, len(exps), total,
                       "Σ_k exp(s_ik − max)", tuple(steps), steps[-1].value, traced, python, notes=notes)


def explain_sink_weight(model, trace, name: str, index: tuple) -> Explanation:
    # sink_weights[h, i, 0]: the share of query i's softmax that head h's sink took (gpt-oss)
    layer, head, i, _ = index
    scores = traced_head(trace, "scores", layer, head)[i].astype(np.float64)
    temperature = _edits(trace, "", layer)[1].get(head)
    shown = scores / temperature if temperature else scores
    sink = float(model.params[f"h.{layer}.attn.sinks"][head]) / (temperature or 1.0)
    top = max(float(np.max(shown)), sink)
    exps = np.exp(shown - top)
    keys = _key_names(model, trace, "")
    terms, rest, total = largest_terms(exps, lambda k: f"exp(s_i{k} − max) ('{keys[k]}')",
                                lambda k: (shown[k] - top,))
    sink_term = float(np.exp(sink - top))
    value = sink_term / (total + sink_term)
    t = f" / {temperature:g}" if temperature else ""
    steps = (Step(f"head {head}'s sink logit{' / T' if temperature else ''}", sink),
             Step("max over the row and the sink", top), Step("exp(sink − max)", sink_term),
             Step("Σ_k exp(s_ik − max) (Σ terms)", total), Step("exp(sink − max) / (Σ + exp(sink − max))", value))
    python = (f"import numpy as np\n"
              f"s = trace.layer('scores', {layer})[{head}, {i}]{t}\n"
              f"sink = float(model.params['h.{layer}.attn.sinks'][{head}]){t}\n"
              f"top = max(s.max(), sink)\n"
              f"value = np.exp(sink - top) / (np.exp(s - top).sum() + np.exp(sink - top))\n")
    notes = ("the sink is a learned logit per head with no value behind it: what it takes, no key "
             "receives, and the head's output is that much shorter",)
    return Explanation(name, index, f"the sink's share of query {Names(trace).token(i)}'s softmax, layer {layer}, "
                       f"head {head}", "w_sink = exp(sink_h − m) / (Σ_k exp(s_ik − m) + exp(sink_h − m))",
                       {"scores of the row": scores}, terms, rest, len(exps), total, "Σ_k exp(s_ik − max)",
                       steps, value, float(traced_head(trace, name, layer, head)[i, 0]), python, notes=notes)


def explain_head_output(model, trace, name: str, index: tuple) -> Explanation:
    layer, head, i, c = index
    n = Names(trace)
    prefix, _ = split_name(name)
    keys = _key_names(model, trace, prefix)
    weights = traced_head(trace, prefix + "attn_weights", layer, head)      # [n_q, n_k]
    v = traced_head(trace, prefix + "v", layer, head)                        # [n_k, d_head]
    products = weights[i].astype(np.float64) * v[:, c]
    label = lambda k: f"w_i{k} · v_{k}[{c}] ('{keys[k]}')"  # noqa: E731
    terms, rest, total = largest_terms(products, label, lambda k: (weights[i, k], v[k, c]))
    steps = [Step(f"Σ_j w_ij · v_j[{c}] (Σ terms)", total)]
    value = total
    mode = _edits(trace, prefix, layer)[0].get(head)
    python = (f"import numpy as np\n"
              f"w = trace.layer('{prefix}attn_weights', {layer})[{head}, {i}]   # the query's weights\n"
              f"v = trace.layer('{prefix}v', {layer})[{head}][:, {c}]          # every key's value, dim {c}\n"
              f"value = w @ v\n")
    notes: tuple[str, ...] = ("the weights are kept: the sum splits into one contribution per source token",)
    if mode == "zero":
        value = 0.0
        steps.append(Step("ablated (AblateHead, zero): replaced by 0", value))
        python += "value = 0.0   # AblateHead(mode='zero')\n"
    elif mode == "mean":
        value = float(np.mean(weights.astype(np.float64) @ v[:, c]))
        steps.append(Step("ablated (AblateHead, mean): the mean over positions", value))
        python = (f"import numpy as np\n"
                  f"w = trace.layer('{prefix}attn_weights', {layer})[{head}]\n"
                  f"v = trace.layer('{prefix}v', {layer})[{head}][:, {c}]\n"
                  f"value = (w @ v).mean()   # AblateHead(mode='mean')\n")
    traced = float(traced_head(trace, name, layer, head)[i, c])
    return Explanation(name, index, f"{'cross-attention ' if prefix else ''}head output of query "
                       f"{n.token(i)}, dim {c}, layer {layer}, head {head}",
                       "o_i[c] = Σ_j w_ij · v_j[c]", {"w_i": weights[i], f"v[:, {c}]": v[:, c]},
                       terms, rest, len(products), total, f"Σ_j w_ij·v_j[{c}]", tuple(steps),
                       float(value), traced, python, notes=notes, summands=products, summand_label=label)


def explain_heads_concat(model, trace, name: str, index: tuple) -> Explanation:
    layer, i, c = index
    d_head = trace.config.d_v                   # a head's output is as wide as its values
    prefix, _ = split_name(name)
    return explain_head_output(model, trace, prefix + "head_outputs", (layer, c // d_head, i, c % d_head))


def _key_names(model, trace, prefix: str):
    """What the keys are called: the trace's tokens, or for cross-attention the source's
    (the decoder trace's `source_tokens`), else 'source k'."""
    if not prefix:
        return trace.tokens
    source = getattr(trace, "source_tokens", None)
    n_keys = trace.layer(prefix + "k", 0).shape[1]
    return source if source is not None and len(source) == n_keys else [f"source {k}" for k in range(n_keys)]


# -- q, k, v: x · W + b, then (Qwen3) the head's RMSNorm, then (rotary) the rotation -------------
def explain_projection(model, trace, name: str, index: tuple) -> Explanation:
    layer, head, i, c = index
    config, n = trace.config, Names(trace)
    prefix, base = split_name(name)
    if prefix and base != "q":
        raise KeyError(f"{name}: the cross-attention's k and v are the encoder output's, projected "
                       f"once per source: explain the encoder's hidden states")
    if config.is_mla:                                         # keys and values from the latent
        return explain_latent_projection(model, trace, name, index)
    which = base[0]                                           # q, k or v
    unrotated = name.endswith("_unrotated")
    d_head = config.d_head
    proj_head = head if which == "q" else config.kv_head_of(head)
    cols = slice(proj_head * d_head, (proj_head + 1) * d_head)
    p = f"h.{layer}.{'cross' if prefix else 'attn'}.{which}"
    x = traced_layer(trace, prefix + "attn_in", layer)[i]
    w = model.params[p + ".w"][:, cols]                       # [d_model, d_head]
    b = model.params[p + ".b"][cols] if config.qkv_bias else None
    pre = x.astype(np.float64) @ w.astype(np.float64) + (0 if b is None else b)
    traced = float(traced_head(trace, name, layer, head)[i, c])
    where = f"{which} of token {n.token(i)}, dim {c}, layer {layer}, head {head}"
    if which != "q" and config.group_size > 1:
        where += f" (K/V head {proj_head}, shared by {config.group_size} query heads)"
    python = (f"import numpy as np\n"
              f"x = trace.layer('{prefix}attn_in', {layer})[{i}]\n"
              f"W = model.params['{p}.w'][:, {cols.start}:{cols.stop}]   # {'K/V' if which != 'q' else 'query'} head {proj_head}'s columns\n"
              + (f"pre = x @ W + model.params['{p}.b'][{cols.start}:{cols.stop}]\n" if b is not None else
                 "pre = x @ W\n"))
    col = cols.start + c
    base = linear(name, index, where, f"{which}[c] = x · W_{which.upper()}[:, c]" + (" + b[c]" if b is not None else ""),
                  x, w[:, c], None if b is None else b[c], traced, "", w_name=f"W_{which.upper()}", col=col)
    steps = list(base.steps)
    formula = base.formula
    value = base.value                                        # = pre[c], the same sum
    head_vector = pre
    if config.qk_norm and which != "v" and config.qk_norm_over == "projection":
        head_vector, value, steps, formula, python = _projection_norm(
            model, trace, which, layer, i, cols, c, steps, formula, python)
    elif config.qk_norm and which != "v":
        g = model.params[f"h.{layer}.attn.{which}_norm.g"]
        rms = np.sqrt(np.mean(pre ** 2) + config.ln_eps)
        head_vector = pre / rms * g
        value = float(head_vector[c])
        steps += [Step(f"÷ RMS of the head's {d_head} values = {format_number(rms)}", float(pre[c] / rms)),
                  Step(f"× g[{c}] = {format_number(float(g[c]))} ({which}_norm)", value)]
        formula = f"RMSNorm({formula})"
        python += (f"g = model.params['h.{layer}.attn.{which}_norm.g']\n"
                   f"pre = pre / np.sqrt(np.mean(pre ** 2) + {config.ln_eps!r}) * g\n")
    notes = []
    angles = _angles_name(trace, layer)           # this layer's (local layers: their own), or None
    rotated = which != "v" and not unrotated and angles is not None
    if rotated and c >= config.d_rotary:      # partial rotary: this dim is not turned
        python += f"value = pre[{c}]\n"
        notes.append(f"partial rotary: only dims 0–{config.d_rotary - 1} of each head turn; dim {c} "
                     f"passes through unrotated")
    elif rotated:
        half = config.d_rotary // 2
        pair = c % half
        angle = float(trace.arrays[angles][i, pair])
        factor = config.rope_attention_factor
        cos, sin = np.cos(angle) * factor, np.sin(angle) * factor
        partner = c + half if c < half else c - half
        scaled = f" · {factor:.6g}" if factor != 1.0 else ""
        if c < half:       # (a, b) -> (a cos − b sin, b cos + a sin), pair (c, c + d_rotary/2)
            value = float(head_vector[c] * cos - head_vector[partner] * sin)
            rotation = f"({which}[{c}]·cos θ − {which}[{partner}]·sin θ){scaled}"
            sign = "-"
        else:
            value = float(head_vector[c] * cos + head_vector[partner] * sin)
            rotation = f"({which}[{c}]·cos θ + {which}[{partner}]·sin θ){scaled}"
            sign = "+"
        python += (f"theta = trace['{angles}'][{i}, {pair}]\n"
                   f"value = (pre[{c}] * np.cos(theta) {sign} pre[{partner}] * np.sin(theta))"
                   + (f" * {factor!r}" if factor != 1.0 else "") + "\n")
        steps += [Step(f"partner dim {partner} before the rotation", float(head_vector[partner])),
                  Step(f"θ = position · freq[{pair}] (cos {np.cos(angle):.6g}, sin {np.sin(angle):.6g})", angle),
                  Step(f"rotated: {rotation}", value)]
        formula = f"rotate({formula}, θ_{i})"
        notes.append(f"rotary: dims {min(c, partner)} and {max(c, partner)} turn together by the angle of position {i}")
        if factor != 1.0:
            notes.append(f"{config.rope_scaling}: cos and sin are multiplied by the attention factor {factor:.6g}")
    else:
        python += f"value = pre[{c}]\n"
    return Explanation(name, index, where, formula, base.operands, base.terms, base.rest,
                       base.n_terms, base.terms_total, base.terms_label, tuple(steps), value,
                       traced, python, notes=tuple(notes), summands=base.summands,
                       summand_label=base.summand_label)


def _angles_name(trace, layer: int):
    """The trace array of this layer's rotation angles (rope_angles, or a local layer's own
    rope_angles_local), or None: no rotation (no rotary, a NoPE layer, positions removed)."""
    config = trace.config
    if "rope_angles" not in trace.arrays or not config.has_rope(layer):
        return None
    if config.is_local(layer) and "rope_angles_local" in trace.arrays:
        return "rope_angles_local"
    return "rope_angles"


def _projection_norm(model, trace, which, layer, i, cols, c, steps, formula, python):
    # OLMo 2: the RMSNorm spans the whole projection (every head), then the head is cut out
    config = trace.config
    p = f"h.{layer}.attn.{which}"
    x = traced_layer(trace, "attn_in", layer)[i].astype(np.float64)
    whole = x @ model.params[p + ".w"].astype(np.float64)
    if config.qkv_bias:
        whole = whole + model.params[p + ".b"]
    g = model.params[f"h.{layer}.attn.{which}_norm.g"]
    rms = np.sqrt(np.mean(whole ** 2) + config.ln_eps)
    head_vector = (whole / rms * g)[cols]
    value = float(head_vector[c])
    steps = steps + [Step(f"÷ RMS of the whole {which} projection ({len(whole)} values) = {format_number(rms)}",
                          float(whole[cols][c] / rms)),
                     Step(f"× g[{cols.start + c}] = {format_number(float(g[cols.start + c]))} ({which}_norm)", value)]
    python += (f"whole = x @ model.params['{p}.w']" + (f" + model.params['{p}.b']" if config.qkv_bias else "")
               + f"\nwhole = whole / np.sqrt(np.mean(whole ** 2) + {config.ln_eps!r})"
               f" * model.params['h.{layer}.attn.{which}_norm.g']\npre = whole[{cols.start}:{cols.stop}]\n")
    return head_vector, value, steps, f"RMSNorm_all({formula})", python
