"""ONE forward pass. Every intermediate goes through `record(name, array, layer)`, so the
trace the stepper shows is produced by the very code that computes the output.

Around it: the parameters' names and shapes (core/model/params.py), each layer's mask and rotary
angles (core/model/layer_context.py, core/model/rotary.py), the keys and values kept for a growing text
(core/model/kv_cache.py) and the output head's parts (core/model/head.py); here the stages' functions,
the block and the pass.

Concat positions (the project's own scheme, for the positions laboratory): the layers see
x0 = [e | p], e a row of wte (width d_token = d_model - d_position) and p the sinusoid table of
width d_position. Sinusoids rather than learned rows, so that concat differs from the shipped
sum-sinusoidal model only in how e and p are combined (no extra parameters to learn, and the
same table a reader already knows). A tied head reads the token part of the last hidden state
only (logits = h[:, :d_token] @ wte.T): the same table in and out, as in the sum models, and no
extra n_vocab x d_model parameters; the position part of h is the blocks' to use. An untied
head (tied_head=False) reads all of h.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from . import interventions as interventions_lib
from . import mla, moe, ops, rotary
from .config import ModelConfig
from .head import head_hidden, vocabulary_logits
from .kv_cache import KVCache
from .layer_context import Context, context, layer_context
from .params import linear, rows

Recorder = Optional[Callable[[str, np.ndarray, Optional[int]], None]]
F32 = np.float32


def _noop(name: str, value: np.ndarray, layer: Optional[int] = None) -> None:
    pass


_noop.keeps_scores = lambda layer: False  # type: ignore[attr-defined]


def keeps_scores(record, layer: int) -> bool:
    # does this recorder keep layer's scores (scores_raw, scores)? If not, the pass may
    # overwrite them in place (same arithmetic, one n_head·n² buffer instead of three): a
    # recorder keeping nothing, or one deriving them from q and k when read (core/trace/layer_detail.py).
    # Unknown recorders keep everything.
    wants = getattr(record, "keeps_scores", None)
    return True if wants is None else wants(layer)


def _record_kv(record, config: ModelConfig, name: str, kv: np.ndarray, layer: int) -> None:
    # k, v, k_unrotated [n_kv_head, n, d_head]: recorded repeated to every query head, or as
    # they are for a recorder that repeats them when read (`repeats_kv`: core/trace/layer_detail.py)
    record(name, kv if getattr(record, "repeats_kv", False) else _repeat_kv(config, kv), layer)


def position_table(config: ModelConfig, params: Mapping[str, np.ndarray], n_seq: int,
                   start: int = 0) -> np.ndarray:
    # Stage 3. -> [n_seq, d_model] for positions start..: learned rows (from position_offset on), or
    # the fixed sinusoids; concat: [n_seq, d_position], sinusoids as wide as the position part
    if config.position == "sinusoidal":
        return ops.sinusoid_table(start + n_seq, config.d_model)[start:]
    if config.position == "concat":
        return ops.sinusoid_table(start + n_seq, config.d_position)[start:]
    first = config.position_offset + start
    return rows(params, "wpe", np.arange(first, first + n_seq))


def pad_skipping_position_ids(config: ModelConfig, input_ids: np.ndarray) -> np.ndarray:
    # [n_seq] ids -> [n_seq] position ids as transformers' create_position_ids_from_input_ids
    # (RoBERTa): pad tokens get padding_idx, the others padding_idx + 1 + how many non-pad
    # tokens come before them
    padding_idx = config.position_offset - 1
    counted = input_ids != padding_idx
    return np.cumsum(counted) * counted + padding_idx


def _position_embeddings(config: ModelConfig, params, n_seq: int, start: int,
                         interventions: tuple, input_ids=None) -> np.ndarray:
    # the position table of this text, as the interventions leave it (zeroed or permuted)
    if (config.skip_pad_positions and input_ids is not None and start == 0
            and (input_ids == config.position_offset - 1).any()):
        position_embeddings = rows(params, "wpe", pad_skipping_position_ids(config, input_ids))
    else:
        position_embeddings = position_table(config, params, n_seq, start)
    if interventions_lib.no_positions(interventions):
        position_embeddings = np.zeros_like(position_embeddings)
    order = interventions_lib.position_order(interventions, n_seq)
    if order is not None:
        position_embeddings = position_embeddings[order]
    return position_embeddings


def lookup(params, input_ids):
    # Stage 2. [n_seq] ids -> [n_seq, d_token]: rows of E (one-hot(ids) · E = row selection)
    return rows(params, "wte", input_ids)


def embed(params, config: ModelConfig, input_ids, token_type_ids, record, start: int = 0,
          interventions: tuple = ()) -> np.ndarray:
    # Stage 4. [n_seq] ids at positions start.. -> [n_seq, d_model]: e (+ p) (+ t), normed
    n_seq = len(input_ids)
    if interventions:
        input_ids = interventions_lib.swapped_ids(interventions, input_ids)
    token_embeddings = lookup(params, input_ids)
    record("token_embeddings", token_embeddings, None)
    x = token_embeddings
    if config.embed_scale != 1.0:
        x = x * F32(config.embed_scale)
        record("token_embeddings_scaled", x, None)
    if config.position == "concat":                       # [e | p]: side by side, not summed
        position_embeddings = _position_embeddings(config, params, n_seq, start, interventions)
        record("position_embeddings", position_embeddings, None)
        x = np.concatenate([x, position_embeddings.astype(x.dtype, copy=False)], axis=-1)
        record("embedding_concat", x, None)
    if config.position in ("learned", "sinusoidal"):
        position_embeddings = _position_embeddings(config, params, n_seq, start, interventions, input_ids)
        record("position_embeddings", position_embeddings, None)
        x = x + position_embeddings
        if config.n_token_types:
            token_type_embeddings = rows(params, "wtt", token_type_ids)
            record("token_type_embeddings", token_type_embeddings, None)
            x += token_type_embeddings
        record("embedding_sum", x, None)
    if config.embed_norm:
        normalized, x = ops.layer_norm(x, params["ln_emb.g"], params["ln_emb.b"], config.ln_eps)
        record("embedding_ln_normalized", normalized, None)
    record("embedding_output", x, None)
    return x


def _repeat_kv(config: ModelConfig, x: np.ndarray) -> np.ndarray:
    # [n_kv, n, d_head] -> [n_head, n, d_head]: each K/V head serves a group of query heads
    return repeat_kv_heads(x, config.group_size)


def repeat_kv_heads(x: np.ndarray, group: int) -> np.ndarray:
    return np.repeat(x, group, axis=0) if group > 1 else x


def _bias(params, name: str, present: bool) -> Optional[np.ndarray]:
    return params[name] if present else None


# The attention stages, each one picoGPT-short function (core/model/stages.py names them; the
# stepper's views, provenance and docs/architecture.md point at them). `attention` below runs them in
# order and adds what is not math: recording, the KV cache, in-place buffers, interventions.

def project_heads(params, config: ModelConfig, x, layer: int, name: str, n_heads: int):
    # [n_seq, d_model] -> [n_heads, n_seq, d_head]: x·W + b of one of q, k, v, split into heads
    p = f"h.{layer}.attn.{name}"
    return ops.split_heads(linear(params, p + ".w", x, _bias(params, p + ".b", config.qkv_bias)),
                           n_heads)


def project_qkv(params, config: ModelConfig, x, layer: int):
    # [n_seq, d_model] -> q [n_head, n_seq, d_head], k, v [n_kv_head, n_seq, d_head]: x·W + b
    return (project_heads(params, config, x, layer, "q", config.n_head),
            project_heads(params, config, x, layer, "k", config.n_kv_heads),
            project_heads(params, config, x, layer, "v", config.n_kv_heads))


def norm_qk(params, config: ModelConfig, q, k, layer: int):
    # q [n_head, n, d_head], k [n_kv_head, n, d_head] -> the same, each head RMS-normed (Qwen3),
    # or each whole projection [n, n_head·d_head] (OLMo 2: qk_norm_over "projection")
    p = f"h.{layer}.attn."
    if config.qk_norm_over == "projection":
        return (ops.split_heads(ops.rms_norm(ops.merge_heads(q), params[p + "q_norm.g"], config.ln_eps)[1],
                                config.n_head),
                ops.split_heads(ops.rms_norm(ops.merge_heads(k), params[p + "k_norm.g"], config.ln_eps)[1],
                                config.n_kv_heads))
    return (ops.rms_norm(q, params[p + "q_norm.g"], config.ln_eps)[1],
            ops.rms_norm(k, params[p + "k_norm.g"], config.ln_eps)[1])


def qkv(params, config: ModelConfig, x, layer: int, ctx: "Context"):
    # Stage 5. [n_seq, d_model] -> q [n_head, n_seq, d_head], k, v [n_kv_head, n_seq, d_head]
    if config.is_mla:                                      # keys and values from a latent
        return mla.qkv(params, config, x, layer, ctx)
    ctx = layer_context(config, ctx, layer)
    q, k, v = project_qkv(params, config, x, layer)
    if config.qk_norm:
        q, k = norm_qk(params, config, q, k, layer)
    if ctx.cos is not None:
        q, k = rotate_qk(q, k, ctx)
    return q, k, v


def rotate_qk(q, k, ctx: "Context"):
    # rotary: q and k (not x) turned by their positions' angles; [h, n, d_head] each
    return ops.rotate(q, ctx.cos, ctx.sin), ops.rotate(k, ctx.cos, ctx.sin)


def attention_scale(config: ModelConfig) -> np.float32:
    # the factor scores are multiplied by: 1/√d_head, or query_pre_attn_scalar^-1/2 (Gemma 2/3,
    # computed as Hugging Face does), or d_head^-1/2 · mscale² (DeepSeek-V2's YaRN correction)
    if config.query_scale:
        return F32(config.query_scale ** -0.5)
    if config.attn_mscale != 1.0:
        return F32(config.d_head ** -0.5 * config.attn_mscale * config.attn_mscale)
    return F32(1.0 / np.sqrt(config.d_head))


def dot_products(q, k):
    # [n_head, n_q, d_head], [n_head, n_k, d_head] -> [n_head, n_q, n_k]: q·kᵀ ("scores_raw")
    return q @ k.transpose(0, 2, 1)


def scale_and_mask(raw, scale, mask, out=None, cap: float = 0.0):
    # [n_head, n_q, n_k] -> raw · scale (soft-capped when cap > 0) + mask (0 where a query may
    # look, -inf where not)
    scaled = np.multiply(raw, scale, out=out)
    if cap:
        scaled = ops.soft_cap(scaled, cap, out=scaled)
    if mask is not None:
        scaled += mask
    return scaled


def scores(q, k, scale, mask, cap: float = 0.0):
    # Stage 6. [n_head, n_q, d_head], [n_head, n_k, d_head], [n_q, n_k] -> [n_head, n_q, n_k]
    return scale_and_mask(dot_products(q, k), scale, mask, cap=cap)


def attention_weights(scores, out=None, sinks=None):
    # Stage 7. [n_head, n_q, n_k] -> softmax over the keys: each row sums to 1. With attention
    # sinks (gpt-oss) [n_head]: each head's sink logit joins every row as one more column that no
    # value is read from, so a row sums to 1 minus the sink's share (sink_softmax)
    if sinks is None:
        return ops.softmax(scores, out=out)
    weights, _ = sink_softmax(scores, sinks)
    if out is None:
        return weights
    out[...] = weights
    return out


def sink_softmax(scores, sinks):
    # [n_head, n_q, n_k], [n_head] -> (weights [n_head, n_q, n_k], the sink's share
    # [n_head, n_q, 1]): softmax over [scores | sink], the sink's column dropped (transformers'
    # eager_attention_forward for gpt-oss)
    combined = with_sink_column(scores, sinks)
    ops.softmax(combined, out=combined)
    return np.ascontiguousarray(combined[..., :-1]), np.ascontiguousarray(combined[..., -1:])


def with_sink_column(scores, sinks):
    # [n_head, n_q, n_k], [n_head] -> [n_head, n_q, n_k + 1]: every row with its head's sink logit last
    combined = np.empty(scores.shape[:-1] + (scores.shape[-1] + 1,), dtype=F32)
    combined[..., :-1] = scores
    combined[..., -1] = np.asarray(sinks, dtype=F32).reshape(-1, 1)
    return combined


def sinks_of(params, config: ModelConfig, layer: int) -> Optional[np.ndarray]:
    # [n_head] this layer's attention sink logits, or None (a model without sinks)
    return params[f"h.{layer}.attn.sinks"] if config.attn_sinks else None


def weighted_sum(weights, v):
    # Stage 8. [n_head, n_q, n_k], [n_head, n_k, d_head] -> [n_head, n_q, d_head]: Σ_j w_ij v_j
    return weights @ v


def output_projection(params, config: ModelConfig, heads_concat, layer: int):
    # Stage 9. [n_seq, n_head * d_head] -> [n_seq, d_model]: concat(heads)·W_O + b
    p = f"h.{layer}.attn."
    return linear(params, p + "o.w", heads_concat, _bias(params, p + "o.b", config.o_bias))


def tempered_weights(scores, temperatures: dict, sinks=None) -> np.ndarray:
    # the temperature intervention: softmax(scores / T) for the heads it names
    scores, sinks = tempered(scores, temperatures, sinks)
    return attention_weights(scores, out=scores, sinks=sinks)


def tempered(scores, temperatures: dict, sinks=None):
    # -> (scores, sinks) copies with the named heads' rows divided by their temperature (with
    # sinks, the head's sink logit too: the whole row's softmax runs at that temperature)
    out = scores.copy()
    sinks = None if sinks is None else np.array(sinks, dtype=F32)
    for head, temperature in temperatures.items():
        out[head] /= F32(temperature)
        if sinks is not None:
            sinks[head] /= F32(temperature)
    return out, sinks


def _ablate(head_outputs, ablations: dict) -> None:
    # the ablation intervention, in place, before W_O (as a hook on o_proj would)
    for head, mode in ablations.items():
        head_outputs[head] = 0 if mode == "zero" else head_outputs[head].mean(axis=0)


def attention(params, config: ModelConfig, x, ctx: Context, layer: int, record,
              cache: Optional[KVCache] = None) -> np.ndarray:
    # [n_seq, d_model] -> [n_seq, d_model]: stages 5-9 in order. With a cache, x holds only
    # the newest rows: their keys and values are appended to the cached ones and their
    # queries read all of them.
    if config.is_mla:                                      # keys and values from a latent
        return latent_attention(params, config, x, ctx, layer, record, cache)
    rotary = ctx.cos is not None                           # (every layer records q_unrotated,
    ctx = layer_context(config, ctx, layer)                # NoPE layers too: there it is q)
    record("attn_in", x, layer)
    q, k, v = project_qkv(params, config, x, layer)
    if config.qk_norm:
        q, k = norm_qk(params, config, q, k, layer)
    if rotary:
        record("q_unrotated", q, layer)
        _record_kv(record, config, "k_unrotated", k, layer)
    if ctx.cos is not None:                                 # rotary: turn q and k, not x
        q, k = rotate_qk(q, k, ctx)
    if cache is not None:
        k, v = cache.append(layer, k, v)                   # [n_kv, n_keys, d_head]
    return attend(params, config, q, k, v, ctx, layer, record)


def latent_attention(params, config: ModelConfig, x, ctx: Context, layer: int, record,
                     cache: Optional[KVCache] = None) -> np.ndarray:
    # stages 5-9 of multi-head latent attention (core/model/mla.py): the cache keeps each
    # position's latent c_kv and rotated k_rope; every key and value is rebuilt from them
    ctx = layer_context(config, ctx, layer)
    record("attn_in", x, layer)
    q = mla.project_q(params, config, x, layer)
    c_kv, k_rope_unrotated = mla.compress(params, config, x, layer)
    record("kv_latent", c_kv, layer)                        # [n_new, kv_lora_rank]
    k_rope = k_rope_unrotated
    if ctx.cos is not None:
        k_rope = ops.rotate_tail_pairs(k_rope_unrotated, ctx.cos, ctx.sin)
    record("k_rope", k_rope, layer)                         # [n_new, d_rope]
    c_all, k_rope_all = c_kv, k_rope
    if cache is not None:                                   # the latents of every position
        c_all, k_rope_all = (a[0] for a in cache.append(layer, c_kv[None], k_rope[None]))
    k_nope, v = mla.expand(params, config, c_all, layer)
    start = len(c_all) - len(c_kv)                          # the new positions' first
    record("q_unrotated", q, layer)
    _record_kv(record, config, "k_unrotated", mla.keys(k_nope[:, start:], k_rope_unrotated), layer)
    if ctx.cos is not None:
        q = rotary.turn(config, q, ctx.cos, ctx.sin)
    return attend(params, config, q, mla.keys(k_nope, k_rope_all), v, ctx, layer, record)


def attend(params, config: ModelConfig, q, k, v, ctx: Context, layer: int, record) -> np.ndarray:
    # q [n_head, n_q, d_head], k, v [n_kv_head, n_k, d_head] -> [n_q, d_model]: stages 6-9
    # from projected heads. Self-attention reads k, v of x itself; cross-attention (core/
    # seq2seq.py) those of the encoder's output, through this same function.
    record("q", q, layer)
    _record_kv(record, config, "k", k, layer)
    _record_kv(record, config, "v", v, layer)
    k, v = _repeat_kv(config, k), _repeat_kv(config, v)    # [n_head, n_keys, d_head]
    in_place = not keeps_scores(record, layer)             # scores not kept: one n² buffer
    raw = dot_products(q, k)
    record("scores_raw", raw, layer)
    scale = attention_scale(config) if ctx.scale is None else F32(ctx.scale)
    if config.attn_softcap and not in_place:               # before tanh: the same product
        record("scores_uncapped", np.multiply(raw, scale), layer)
    scaled = scale_and_mask(raw, scale, ctx.mask, out=raw if in_place else None, cap=config.attn_softcap)
    record("scores", scaled, layer)
    ablations, temperatures = interventions_lib.head_edits(ctx.interventions, layer)
    sinks = sinks_of(params, config, layer)
    if sinks is not None:                                  # gpt-oss: the sink takes its share
        weights, share = sink_softmax(*(tempered(scaled, temperatures, sinks) if temperatures
                                        else (scaled, sinks)))
        record("attn_weights", weights, layer)
        record("sink_weights", share, layer)               # [n_head, n_q, 1]: what no key received
    else:
        if temperatures:
            weights = tempered_weights(scaled, temperatures)
        else:
            weights = attention_weights(scaled, out=scaled if in_place else None)
        record("attn_weights", weights, layer)
    head_outputs = weighted_sum(weights, v)
    _ablate(head_outputs, ablations)
    record("head_outputs", head_outputs, layer)
    heads_concat = ops.merge_heads(head_outputs)           # [n_seq, n_head * d_head]
    record("heads_concat", heads_concat, layer)
    attn_out = output_projection(params, config, heads_concat, layer)
    record("attn_out", attn_out, layer)
    return attn_out


# The arrays `attend` records over (query, key) pairs: [n_head, n_q, n_k]
PAIR_NAMES = ("scores_raw", "scores_uncapped", "scores", "attn_weights")


def later_keys(config: ModelConfig, q: Optional[np.ndarray], k_later: Optional[np.ndarray],
               names, n_q: int, n_k: int) -> dict[str, np.ndarray]:
    """What `attend` records over (query, key) pairs for keys that come after every query of
    `q` (a causal pass masks them all), for those of `names` it records: q [n_head, n_q, d_head]
    and k_later [n_head, n_k, d_head] as attend sees them (rotated, repeated over GQA groups).
    -> name -> [n_head, n_q, n_k]. A trace grown by later positions (core/trace/row_blocks.py) fills
    its earlier rows' new columns with these: the products q·k of keys not yet there when the
    rows were computed, scaled and masked by the same functions, and weight 0 (what the
    softmax gives a blocked key; NaN rows of corrupt weights would give NaN)."""
    out: dict[str, np.ndarray] = {}
    needs_product = {"scores_raw", "scores_uncapped", "scores"} & set(names)
    if needs_product:
        if q is None or k_later is None:
            raise KeyError("scores over later keys need the layer's q and k")
        raw = dot_products(q, k_later)
        scale = attention_scale(config)
        blocked = ops.additive_mask(np.ones((n_q, n_k), dtype=bool))
        out["scores_raw"] = raw
        if config.attn_softcap:
            out["scores_uncapped"] = np.multiply(raw, scale)
        out["scores"] = scale_and_mask(raw, scale, blocked, cap=config.attn_softcap)
    if "attn_weights" in names:
        out["attn_weights"] = np.zeros((config.n_head if q is None else q.shape[0], n_q, n_k), dtype=F32)
    return {name: value for name, value in out.items() if name in names}


def feed_forward(params, config: ModelConfig, x, layer: int, record, interventions: tuple = ()) -> np.ndarray:
    # Stage 10. [n_seq, d_model] -> [n_seq, d_model]: proj(act(fc(x))), or gated: proj(act(gate(x)) * up(x));
    # an MoE layer routes each token to its experts (core/model/moe.py)
    if config.is_moe_layer(layer):
        return moe.feed_forward(params, config, x, layer, record,
                                interventions_lib.router_edits(interventions, layer))
    if config.is_moe:                                      # (the per-layer lists stay aligned)
        for name, empty in moe.no_router(x).items():
            record(name, empty, layer)
    p = f"h.{layer}.mlp."
    activation = ops.ACTIVATIONS[config.activation]
    record("mlp_in", x, layer)
    first = "gate" if config.gated_mlp else "fc"
    pre_act = linear(params, p + first + ".w", x, _bias(params, p + first + ".b", config.mlp_bias))
    record("mlp_pre_act", pre_act, layer)                  # [n_seq, d_ff]; the gate when gated
    act = activation(pre_act)
    record("mlp_act", act, layer)
    if config.gated_mlp:
        up = linear(params, p + "up.w", x, _bias(params, p + "up.b", config.mlp_bias))
        record("mlp_up", up, layer)
        act = act * up
        record("mlp_gated", act, layer)                    # what the down projection reads
    out = linear(params, p + "proj.w", act, _bias(params, p + "proj.b", config.mlp_bias))
    record("mlp_out", out, layer)
    return out


def norm(params, config: ModelConfig, prefix: str, x):
    # -> (normalized, output): LayerNorm (prefix.g, prefix.b) or RMSNorm (prefix.g)
    if config.norm_kind == "rms":
        return ops.rms_norm(x, params[prefix + ".g"], config.ln_eps)
    return ops.layer_norm(x, params[prefix + ".g"], params[prefix + ".b"], config.ln_eps)


def _norm(params, config, name, x, layer, record):
    record(f"{name}_in", x, layer)
    normalized, out = norm(params, config, f"h.{layer}.{name}", x)
    record(f"{name}_normalized", normalized, layer)
    record(f"{name}_out", out, layer)
    return out


def _branch_norms(params, config: ModelConfig, x, ctx: Context, layer: int, record,
                  cache: Optional[KVCache]) -> np.ndarray:
    # sandwich (Gemma 2/3): x + post_attn_ln(attention(ln_1(x))), then the same with ln_2,
    # feed_forward and post_mlp_ln; branch_out (OLMo 2): no ln_1/ln_2, only the output norms
    branch_in = config.norms_branch_input
    a = _norm(params, config, "ln_1", x, layer, record) if branch_in else x
    a = attention(params, config, a, ctx, layer, record, cache)
    x = x + _norm(params, config, "post_attn_ln", a, layer, record)
    record("attn_residual", x, layer)
    m = _norm(params, config, "ln_2", x, layer, record) if branch_in else x
    m = feed_forward(params, config, m, layer, record, ctx.interventions)
    x = x + _norm(params, config, "post_mlp_ln", m, layer, record)
    record("mlp_residual", x, layer)
    return x


def block(params, config: ModelConfig, x, ctx: Context, layer: int, record,
          cache: Optional[KVCache] = None) -> np.ndarray:
    # Stage 11. [n_seq, d_model] -> [n_seq, d_model]; ln_1 belongs to attention, ln_2 to the feed-forward
    record("layer_in", x, layer)
    if config.parallel_residual:
        x = parallel_residual(params, config, x, ctx, layer, record, cache)
    elif config.norms_branch_output:
        x = _branch_norms(params, config, x, ctx, layer, record, cache)
    elif config.norm == "pre":
        x = x + attention(params, config, _norm(params, config, "ln_1", x, layer, record), ctx,
                          layer, record, cache)
        record("attn_residual", x, layer)
        x = x + feed_forward(params, config, _norm(params, config, "ln_2", x, layer, record), layer, record,
                             ctx.interventions)
        record("mlp_residual", x, layer)
    else:
        x = x + attention(params, config, x, ctx, layer, record, cache)
        record("attn_residual", x, layer)
        x = _norm(params, config, "ln_1", x, layer, record)
        x = x + feed_forward(params, config, x, layer, record, ctx.interventions)
        record("mlp_residual", x, layer)
        x = _norm(params, config, "ln_2", x, layer, record)
    record("layer_out", x, layer)
    return x


def parallel_residual(params, config: ModelConfig, x, ctx: Context, layer: int, record,
                      cache: Optional[KVCache] = None) -> np.ndarray:
    # [n_seq, d_model] -> [n_seq, d_model]: x + attn(ln_1(x)) + mlp(ln_2(x)) (GPT-NeoX, Pythia):
    # both branches read the layer's input x (ln_2_in is layer_in, not the attention's sum);
    # attn_residual = x + attn, then + mlp: the same sum, recorded in two steps
    attn_out = attention(params, config, _norm(params, config, "ln_1", x, layer, record), ctx,
                         layer, record, cache)
    mlp_out = feed_forward(params, config, _norm(params, config, "ln_2", x, layer, record), layer, record,
                           ctx.interventions)
    x = x + attn_out
    record("attn_residual", x, layer)
    x = x + mlp_out
    record("mlp_residual", x, layer)
    return x


def lm_head(params, config: ModelConfig, h, record) -> np.ndarray:
    # Stage 12. [n_seq, d_model] -> [n_seq, n_vocab]
    logits = vocabulary_logits(params, config, head_hidden(params, config, h, record))
    record("logits", logits, None)
    return logits


def forward(params: Mapping[str, np.ndarray], config: ModelConfig, input_ids: np.ndarray,
            token_type_ids: np.ndarray | None = None, record: Recorder = None,
            ctx: Optional[Context] = None, cache: Optional[KVCache] = None,
            logits: bool = True, after_layer: Optional[Callable[[int], None]] = None) -> dict:
    """[n_seq] ids -> {"last_hidden_state": [n_seq, d_model], "logits": [n_seq, n_vocab] or None}.
    `ctx` is context(config, n_seq), passed in when the caller keeps it. With a `cache` holding
    the keys and values of earlier positions, input_ids are the tokens that follow them (and
    ctx is context(config, n_cached + n_new, start=n_cached)); the cache grows by them. With
    `logits=False` the head stops before the vocabulary product ([n_seq, n_vocab], often the
    largest array and a third of the time): a trace computes the rows it is asked for.
    `after_layer(i)` is called when layer i is done (progress; raising there stops the pass)."""
    record = record or _noop
    input_ids = np.asarray(input_ids, dtype=np.int64)
    if token_type_ids is None:
        token_type_ids = np.zeros_like(input_ids)
    start = cache.n_seq if cache is not None else 0
    if ctx is None:
        ctx = context(config, start + len(input_ids), record, start)
    x = embed(params, config, input_ids, token_type_ids, record, start, ctx.interventions)
    for layer in range(config.n_layer):
        x = block(params, config, x, ctx, layer, record, cache)
        if after_layer is not None:
            after_layer(layer)
    return finish(params, config, x, record, logits)


def finish(params, config: ModelConfig, x: np.ndarray, record, logits: bool = True) -> dict:
    """After the last block: the final norm (where the model has one) and the output head
    (without its vocabulary product when `logits` is False; see forward)."""
    if config.final_norm:
        normalized, x = norm(params, config, "ln_f", x)
        record("final_ln_normalized", normalized, None)
        record("final_ln_out", x, None)
    if not config.lm_head:
        return {"last_hidden_state": x, "logits": None}
    if not logits:
        head_hidden(params, config, x, record)
        return {"last_hidden_state": x, "logits": None}
    return {"last_hidden_state": x, "logits": lm_head(params, config, x, record)}

