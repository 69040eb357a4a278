"""Provenance of multi-head latent attention's q, k and v (core/model/mla.py): a key's or value's
number is the token's cached latent c_kv times one column of W_kv_b; a query's (V2-Lite's one q
matrix) is x times one column of W_Q. The rotated tail of q and k (a position turning a pair of
numbers) is named, not expanded: k's tail is k_rope, the same for every head."""
from __future__ import annotations

from .terms import Explanation, Names, traced_head, traced_layer, linear


def explain_latent_projection(model, trace, name: str, index: tuple) -> Explanation:
    layer, head, i, c = index
    config, n = trace.config, Names(trace)
    which, rotated = name[0], not name.endswith("_unrotated")
    d_nope = config.d_head - config.d_rotary
    traced = float(traced_head(trace, name, layer, head)[i, c])
    where = f"{which} of token {n.token(i)}, dim {c}, layer {layer}, head {head}"
    if which != "v" and c >= d_nope and rotated:
        part = "k_rope, the rotated key part every head shares" if which == "k" else "q's rotated tail"
        raise KeyError(f"{name}: dims {d_nope}–{config.d_head - 1} are {part} (a position turns them in "
                       f"pairs); the dims before them are explained")
    if which == "q":
        if config.q_lora_rank:
            raise KeyError(f"{name}: this model's q goes through its own latent (q_a, RMSNorm, q_b): "
                           f"not explained here")
        col = head * config.d_head + c
        x = traced_layer(trace, "attn_in", layer)[i]
        python = (f"x = trace.layer('attn_in', {layer})[{i}]\n"
                  f"value = x @ model.params['h.{layer}.attn.q.w'][:, {col}]\n")
        return linear(name, index, where, "q[c] = x · W_Q[:, c]", x, model.params[f"h.{layer}.attn.q.w"][:, col],
                      None, traced, python, w_name="W_Q", col=col)
    if which == "k" and c >= d_nope:            # k_unrotated's tail: x · W_kv_a, before the turn
        col = config.kv_lora_rank + c - d_nope
        x = traced_layer(trace, "attn_in", layer)[i]
        python = (f"x = trace.layer('attn_in', {layer})[{i}]\n"
                  f"value = x @ model.params['h.{layer}.attn.kv_a.w'][:, {col}]\n")
        return linear(name, index, where + " (the rotary part before its turn, shared by every head)",
                      "k_rope[c] = x · W_kv_a[:, c]", x, model.params[f"h.{layer}.attn.kv_a.w"][:, col],
                      None, traced, python, w_name="W_kv_a", col=col)
    col = head * (d_nope + config.d_v) + (c if which == "k" else d_nope + c)
    latent = traced_layer(trace, "kv_latent", layer)[i]
    python = (f"c_kv = trace.layer('kv_latent', {layer})[{i}]   # what the KV cache keeps\n"
              f"value = c_kv @ model.params['h.{layer}.attn.kv_b.w'][:, {col}]\n")
    return linear(name, index, where + " (rebuilt from the cached latent)", f"{which}[c] = c_kv · W_kv_b[:, col]",
                  latent, model.params[f"h.{layer}.attn.kv_b.w"][:, col], None, traced, python,
                  x_name="c_kv", w_name="W_kv_b", col=col,
                  notes=(f"c_kv is token {n.token(i)}'s latent ({config.kv_lora_rank} numbers), the "
                         f"only thing the KV cache keeps besides k_rope",))
