"""Provenance of the position-wise arrays: norms (LayerNorm, RMSNorm), the feed-forward (plain
and gated), the output projections, the residual additions, the embedding lookup and sum, and
the logits."""
from __future__ import annotations

import dataclasses

import numpy as np

from ...model import interventions as interventions_lib
from ...model import ops
from ...model.forward import pad_skipping_position_ids
from ...model.head import head_table, output_direction
from ...model.params import rows
from ..labels import ACTIVATION_SHORT, NORM_LABELS
from .params import PARAM, explain_parameter, weight_steps
from .terms import Explanation, Names, Step, Term, traced_layer, format_number, largest_terms, linear


# -- norms ---------------------------------------------------------------------------------
def _norm_source(trace, name: str, index: tuple) -> tuple[str, np.ndarray, str, str, str, int]:
    # -> (norm's parameter prefix, its input vector, the input's Python expression, where, what, c)
    config = trace.config
    if name.startswith(("ln_1", "ln_2", "ln_cross", "post_attn_ln", "post_mlp_ln")):
        layer, i, c = index
        ln = name.rsplit("_", 1)[0]
        return (f"h.{layer}.{ln}", traced_layer(trace, f"{ln}_in", layer)[i],
                f"trace.layer('{ln}_in', {layer})[{i}]", f"layer {layer}", ln, c)
    i, c = index
    if name.startswith("final_ln"):
        last = config.n_layer - 1
        return ("ln_f", trace.residual["layer_out"][last][i],
                f"trace.layer('layer_out', {last})[{i}]", "after the last layer", "final norm", c)
    source = "embedding_sum" if "embedding_sum" in trace.arrays else "token_embeddings"
    return ("ln_emb", trace.arrays[source][i], f"trace['{source}'][{i}]", "embedding", "embedding LayerNorm", c)


def explain_norm(model, trace, name: str, index: tuple) -> Explanation:
    config, n = trace.config, Names(trace)
    prefix, x, x_expr, where, what, c = _norm_source(trace, name, index)
    i = index[-2]
    rms = config.norm_kind == "rms"
    affine = not name.endswith("_normalized")
    x64 = x.astype(np.float64)
    eps = config.ln_eps
    steps = [Step(f"x[{c}]", float(x64[c]))]
    if rms:
        products = x64 ** 2 / len(x64)
        terms, rest, total = largest_terms(products, lambda d: f"x[{d}]² / {len(x64)}", lambda d: (x64[d],))
        scale = np.sqrt(total + eps)
        normalized = x64[c] / scale
        steps += [Step("mean of x² (Σ terms)", total), Step(f"RMS = √(mean x² + ε), ε = {eps:g}", scale),
                  Step(f"x[{c}] / RMS", normalized)]
        formula = "y[c] = x[c] / √(mean(x²) + ε) · g[c]"
        python = (f"import numpy as np\nx = {x_expr}\n"
                  f"normalized = x[{c}] / np.sqrt(np.mean(x ** 2) + {eps!r})\n")
        label = "mean(x²)"
    else:
        mean = float(x64.mean())
        products = (x64 - mean) ** 2 / len(x64)
        terms, rest, total = largest_terms(products, lambda d: f"(x[{d}] − μ)² / {len(x64)}", lambda d: (x64[d], mean))
        scale = np.sqrt(total + eps)
        normalized = (x64[c] - mean) / scale
        steps += [Step("mean μ", mean), Step("variance σ² (Σ terms)", total),
                  Step(f"√(σ² + ε), ε = {eps:g}", scale), Step(f"(x[{c}] − μ) / √(σ² + ε)", normalized)]
        formula = "y[c] = (x[c] − μ) / √(σ² + ε) · γ[c] + β[c]"
        python = (f"import numpy as np\nx = {x_expr}\n"
                  f"mu = x.mean()\nvariance = ((x - mu) ** 2).mean()\n"
                  f"normalized = (x[{c}] - mu) / np.sqrt(variance + {eps!r})\n")
        label = "σ²"
    value = normalized
    if affine:
        g = float(model.params[prefix + ".g"][c])
        value = normalized * g
        steps.append(Step(f"× {'g' if rms else 'γ'}[{c}] = {format_number(g)}", value))
        python += f"value = normalized * model.params['{prefix}.g'][{c}]"
        if not rms:
            b = float(model.params[prefix + ".b"][c])
            value = value + b
            steps.append(Step(f"+ β[{c}] = {format_number(b)}", value))
            python += f" + model.params['{prefix}.b'][{c}]"
        python += "\n"
    else:
        python += "value = normalized\n"
    traced = float(traced_layer(trace, name, index[0])[index[1:]] if name.startswith(("ln_", "post_attn_ln", "post_mlp_ln"))
                   else trace.arrays[name][index])
    title = f"{NORM_LABELS[config.norm_kind]} {what} ({where}) of token {n.token(i)}, dim {c}"
    if not affine:
        title += ", before the gain"
    return Explanation(name, index, title, formula, {"x": x}, terms, rest, len(x), total, label,
                       tuple(steps), float(value), traced, python,
                       notes=("the terms show which dimensions make the " +
                              ("mean square" if rms else "variance") + ": one large dimension shrinks all the others",))


# -- feed-forward -------------------------------------------------------------------------------
def _mlp_linear(model, trace, name: str, index: tuple, which: str) -> Explanation:
    # x · W[:, u] + b[u] for the first projection (fc or gate) or up
    layer, i, u = index
    config, n = trace.config, Names(trace)
    p = f"h.{layer}.mlp.{which}"
    x = traced_layer(trace, "mlp_in", layer)[i]
    w_col = model.params[p + ".w"][:, u]
    b = float(model.params[p + ".b"][u]) if config.mlp_bias else None
    python = (f"x = trace.layer('mlp_in', {layer})[{i}]\n"
              f"pre = x @ model.params['{p}.w'][:, {u}]" + (f" + model.params['{p}.b'][{u}]" if b is not None else "") + "\n")
    traced = float(traced_layer(trace, name, layer)[i, u])
    w_name = {"fc": "W1", "gate": "W_gate", "up": "W_up"}[which]
    return linear(name, index, f"{which} pre-activation of token {n.token(i)}, unit {u}, layer {layer}",
                  f"{which}[u] = x · {w_name}[:, u]" + (" + b[u]" if b is not None else ""),
                  x, w_col, b, traced, python + "value = pre\n", w_name=w_name, col=u)


def explain_mlp_pre(model, trace, name: str, index: tuple) -> Explanation:
    which = "up" if name == "mlp_up" else ("gate" if trace.config.gated_mlp else "fc")
    return _mlp_linear(model, trace, name, index, which)


def _with(base: Explanation, name: str, title: str, formula: str, steps: list, value: float,
          traced: float, python: str, sources: tuple = (), notes: tuple = ()) -> Explanation:
    return Explanation(name, base.index, title, formula, base.operands, base.terms, base.rest,
                       base.n_terms, base.terms_total, base.terms_label, tuple(steps), float(value),
                       float(traced), python, sources, notes, summands=base.summands,
                       summand_label=base.summand_label)


def _activate(activation: str, value: float) -> float:
    return float(ops.ACTIVATIONS[activation](np.array([value], dtype=np.float32))[0])


def explain_activation(model, trace, name: str, index: tuple) -> Explanation:
    layer, i, u = index
    config = trace.config
    base = explain_mlp_pre(model, trace, "mlp_pre_act", index)
    short = ACTIVATION_SHORT[config.activation]
    pre = base.value
    value = _activate(config.activation, pre)
    act_call = f"ops.ACTIVATIONS['{config.activation}'](np.float32([pre]))[0]"
    python = "import numpy as np\nfrom transformer_stepper.core.model import ops\n" + base.python.replace(
        "value = pre\n", "") + "act = " + act_call + "\n"
    steps = list(base.steps) + [Step(f"{short}(pre)", value)]
    traced = float(traced_layer(trace, name, layer)[i, u])
    if name == "mlp_gated":
        up = explain_mlp_pre(model, trace, "mlp_up", index)
        value = value * up.value
        steps += [Step(f"up[{u}] = x · W_up[:, {u}] (below)", up.value), Step(f"{short}(gate) × up", value)]
        python += up.python.replace("pre = ", "up = ").replace("value = pre\n", "") + "value = act * up\n"
        return _with(base, name, f"gated unit {u} of token {Names(trace).token(i)}, layer {layer}",
                     f"h[u] = {short}(x · W_gate[:, u]) × (x · W_up[:, u])", steps, value, traced,
                     python, sources=(up,))
    python += "value = act\n"
    what = "gate" if config.gated_mlp else "hidden unit"
    return _with(base, name, f"{what} {u} of token {Names(trace).token(i)} after {short}, layer {layer}",
                 f"h[u] = {short}(x · W[:, u]" + (" + b[u])" if config.mlp_bias else ")"), steps, value,
                 traced, python, notes=(f"{short} at pre = {format_number(pre)} gives {format_number(value)}",))


def explain_output_linear(model, trace, name: str, index: tuple) -> Explanation:
    # attn_out = heads_concat · W_O + b_O ; mlp_out = hidden · W_down + b
    layer, i, c = index
    config, n = trace.config, Names(trace)
    if name in ("attn_out", "cross_attn_out"):
        prefix = name[:-len("attn_out")]
        source, w_name, bias = prefix + "heads_concat", "W_O", config.o_bias
        p = f"h.{layer}.{'cross' if prefix else 'attn'}.o"
        x_name = "heads"
    else:
        source = "mlp_gated" if config.gated_mlp else "mlp_act"
        p, w_name, bias, x_name = f"h.{layer}.mlp.proj", "W_down" if config.gated_mlp else "W2", config.mlp_bias, "h"
    x = traced_layer(trace, source, layer)[i]
    w_col = model.params[p + ".w"][:, c]
    b = float(model.params[p + ".b"][c]) if bias else None
    python = (f"x = trace.layer('{source}', {layer})[{i}]\n"
              f"value = x @ model.params['{p}.w'][:, {c}]" + (f" + model.params['{p}.b'][{c}]" if b is not None else "") + "\n")
    notes: tuple = ()
    if name != "mlp_out":
        d_head = config.d_head
        by_head = (x.astype(np.float64) * w_col).reshape(config.n_head, d_head).sum(axis=1)
        notes = ("by head: " + ", ".join(f"head {h} {format_number(v)}" for h, v in enumerate(by_head)),)
    traced = float(traced_layer(trace, name, layer)[i, c])
    what = {"attn_out": "attention output", "cross_attn_out": "cross-attention output"}.get(name, "feed-forward output")
    return linear(name, index, f"{what} of token {n.token(i)}, dim {c}, layer {layer}",
                  f"out[c] = {x_name} · {w_name}[:, c]" + (" + b[c]" if b is not None else ""),
                  x, w_col, b, traced, python, x_name=x_name, w_name=w_name, col=c, notes=notes)


# -- additions: residuals and the embedding sum -------------------------------------------------
def _sum(name: str, index: tuple, title: str, formula: str, parts: list[tuple[str, float, str]],
         traced: float) -> Explanation:
    # parts: (label, value, Python expression)
    terms = tuple(Term(label, (value,), value) for label, value, _ in parts)
    total = float(sum(np.float64(v) for _, v, _ in parts))
    python = "value = " + " + ".join(expr for _, _, expr in parts) + "\n"
    return Explanation(name, index, title, formula, {}, terms, 0.0, len(parts), total, "sum",
                       (Step("Σ", total),), total, traced, python)


def explain_residual(model, trace, name: str, index: tuple) -> Explanation:
    layer, i, c = index
    n = Names(trace)
    branch_out = trace.config.norms_branch_output
    decoder = "cross_residual" in trace.layer_names()     # an encoder–decoder's decoder block
    if name == "attn_residual":
        first, second = "layer_in", "post_attn_ln_out" if branch_out else "attn_out"
        formula = "x + post_attn_ln(attention(x))" if branch_out else "x + attention(x)"
    elif name == "cross_residual":
        first, second = ("ln_1_out" if trace.config.norm == "post" else "attn_residual"), "cross_attn_out"
        formula = "stream + cross_attention(stream, encoder output)"
    else:
        before = ("ln_cross_out", "cross_residual") if decoder else ("ln_1_out", "attn_residual")
        first = before[0] if trace.config.norm == "post" else before[1]
        second = "post_mlp_ln_out" if branch_out else "mlp_out"
        formula = ("stream + post_mlp_ln(feed_forward(stream))" if branch_out
                   else "stream + feed_forward(stream)")
    parts = [(f"{a}[{c}]", float(traced_layer(trace, a, layer)[i, c]), f"trace.layer('{a}', {layer})[{i}, {c}]")
             for a in (first, second)]
    return _sum(name, index, f"residual {name} of token {n.token(i)}, dim {c}, layer {layer}", formula,
                parts, float(traced_layer(trace, name, layer)[i, c]))


def explain_embedding_sum(model, trace, name: str, index: tuple) -> Explanation:
    i, c = index
    token = "token_embeddings_scaled" if "token_embeddings_scaled" in trace.arrays else "token_embeddings"
    names = [token, "position_embeddings"] + (["token_type_embeddings"] if "token_type_embeddings" in trace.arrays else [])
    parts = [(f"{a}[{c}]", float(trace.arrays[a][i, c]), f"trace['{a}'][{i}, {c}]") for a in names]
    return _sum(name, index, f"embedding sum of token {Names(trace).token(i)}, dim {c}",
                "x = e + p" + (" + t" if len(names) > 2 else ""), parts, float(trace.arrays[name][i, c]))


def explain_lookup(model, trace, name: str, index: tuple) -> Explanation:
    i, c = index
    config = trace.config
    sources: tuple = ()
    if name == "position_embeddings":
        order = interventions_lib.position_order(trace.interventions, trace.n_seq)
        position = int(order[i]) if order is not None else i
        if interventions_lib.no_positions(trace.interventions):
            value, how, python = 0.0, "NoPositions: zero", "value = 0.0\n"
        elif config.position == "sinusoidal":
            frequency = 1.0 / 10000.0 ** ((c - c % 2) / config.d_model)
            angle = position * frequency
            value = float(np.float32(np.sin(angle) if c % 2 == 0 else np.cos(angle)))
            fn = "sin" if c % 2 == 0 else "cos"
            how = f"{fn}({position} / 10000^({c - c % 2}/{config.d_model}))"
            python = f"import numpy as np\nvalue = np.float32(np.{fn}({position} / 10000 ** ({c - c % 2} / {config.d_model})))\n"
        else:
            row = config.position_offset + position
            if config.skip_pad_positions:      # RoBERTa: pad tokens are not counted
                row = int(pad_skipping_position_ids(config, trace.input_ids)[position])
            value = float(rows(model.params, "wpe", np.array([row]))[0, c])
            how = f"row {row} of the position table wpe" + (
                " (pad tokens take row padding_idx and are not counted)" if config.skip_pad_positions else "")
            python = f"value = model.params['wpe'][{row}, {c}]\n"
        steps = (Step(how, value),)
        formula = "p[c] = the position's row of P"
    else:
        token_id = int(interventions_lib.swapped_ids(trace.interventions, trace.input_ids)[i])
        value = float(rows(model.params, "wte", np.array([token_id]))[0, c])
        steps = [Step(f"E[{token_id}, {c}] (row {token_id} of the embedding table)", value)]
        python = f"value = model.params['wte'][{token_id}, {c}]"
        if name == "token_embeddings_scaled":
            value = float(np.float32(value) * np.float32(config.embed_scale))
            steps.append(Step(f"× {config.embed_scale:g} (√d_model)", value))
            python += f" * np.float32({config.embed_scale!r})"
            python = "import numpy as np\n" + python
        python += "\n"
        steps, formula = tuple(steps), "e[c] = E[id, c]: one-hot(id) × E selects a row"
        if weight_steps(model, "wte", (token_id, c)) is not None:     # a quantized table
            sources = (explain_parameter(model, trace, PARAM + "wte", (token_id, c)),)
    return Explanation(name, index, f"{name} of token {Names(trace).token(i)}, dim {c}", formula, {}, (),
                       0.0, 0, 0.0, "", steps, value, float(trace.arrays[name][i, c]), python,
                       sources=sources, notes=("a lookup: no arithmetic, the same row in every sentence",))


# -- logits -----------------------------------------------------------------------------------------
def explain_logit(model, trace, name: str, index: tuple) -> Explanation:
    i, t = index
    config = trace.config
    if "head_transform" in trace.arrays:
        source, expr = trace.arrays["head_transform"][i], f"trace['head_transform'][{i}]"
    elif "final_ln_out" in trace.arrays:
        source, expr = trace.arrays["final_ln_out"][i], f"trace['final_ln_out'][{i}]"
    else:
        last = config.n_layer - 1
        source, expr = trace.residual["layer_out"][last][i], f"trace.layer('layer_out', {last})[{i}]"
    table = head_table(config)
    row = output_direction(model.params, config, t)   # zero over a tied concat model's position part
    bias = float(model.params["head.bias"][t]) if config.lm_head_transform and "head.bias" in model.params else None
    bias_name = "head.bias"
    seq2seq = getattr(trace.logit_head, "seq2seq", None)   # an encoder–decoder's head: T5 scales h,
    notes = []                                              # BART and Marian add final_logits_bias
    if seq2seq is not None and seq2seq.head_scale != 1.0:
        source = source * np.float32(seq2seq.head_scale)
        expr += f" * np.float32({seq2seq.head_scale!r})"
        notes.append(f"T5's tied head reads h · d_model^-0.5 = h · {seq2seq.head_scale:.6g}")
    if seq2seq is not None and seq2seq.logits_bias:
        bias, bias_name = float(trace.logit_head.params["final_logits_bias"][t]), "final_logits_bias"
        notes.append("plus final_logits_bias, one number per vocabulary token")
    python = ("import numpy as np\n" if seq2seq is not None else "") + (
              f"h = {expr}      # the final hidden state\n"
              f"value = h @ model.params['{table}'][{t}]" + (f" + model.params['{bias_name}'][{t}]" if bias is not None else "") + "\n")
    token = model.tokenizer.id_to_token(t) if hasattr(model, "tokenizer") else str(t)
    explained = linear(name, index, f"logit of token {t} '{token}' at position {Names(trace).token(i)}",
                       f"logit = h · {'E' if config.tied_head else 'W_U'}[{t}]" + (" + b" if bias is not None else ""),
                       source, row, bias, float(trace.logits_at(i)[t]), python, x_name="h",
                       w_name="E" if config.tied_head else "W_U", col=t,
                       notes=tuple(notes) + (("the head is tied: the token's row of the embedding table",)
                                             if config.tied_head else ()))
    return _soft_capped(explained, config.final_softcap) if config.final_softcap else explained


def _soft_capped(explained: Explanation, cap: float) -> Explanation:
    # Gemma 2's final_logit_softcapping: the product, then cap · tanh(product / cap)
    value = float(cap * np.tanh(explained.value / cap))
    python = explained.python + f"import numpy as np\nvalue = {cap!r} * np.tanh(value / {cap!r})   # final_logit_softcapping\n"
    return dataclasses.replace(explained, formula=f"{cap:g}·tanh(({explained.formula.removeprefix('logit = ')}) / {cap:g})",
                               steps=(*explained.steps, Step(f"soft-cap: {cap:g} · tanh(logit / {cap:g})", value)),
                               value=value, python=python)
