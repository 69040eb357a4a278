"""ONE forward pass. Every intermediate goes through `record(name, array, layer)`, so the
trace the stepper shows is produced by the very code that computes the output.

Parameters use one naming scheme for every family (the loaders map checkpoints onto it):
  wte [n_vocab, d_token]   wpe [position_offset + n_ctx, d_model] (learned only)
                           d_token = d_model, or d_model - d_position for concat positions
  wtt [n_types, d_model]   ln_emb.{g,b}   ln_f.{g[,b]}   lm_head.w [n_vocab, d_model] (untied)
  h.{i}.ln_1.{g[,b]}  h.{i}.ln_2.{g[,b]}           .b only for LayerNorm, not RMSNorm
  h.{i}.attn.{q,k,v,o}.{w[,b]}   w stored [d_in, d_out]; k, v have n_kv_head heads
  h.{i}.attn.{q,k}_norm.g [d_head]                  (qk_norm; qk_norm_over "projection":
                                                    [n_head·d_head], [n_kv_head·d_head])
  h.{i}.post_attn_ln.g  h.{i}.post_mlp_ln.g       (norms of each branch's output: sandwich,
                                                    branch_out)
  h.{i}.mlp.fc.{w[,b]} [d_model, d_ff]  h.{i}.mlp.proj.{w[,b]} [d_ff, d_model]
  h.{i}.mlp.gate.{w[,b]}, h.{i}.mlp.up.{w[,b]} [d_model, d_ff] (gated_mlp: instead of fc)
  head.transform.{w,b}  head.ln.{g,b}  head.bias   (BERT's masked-LM head)

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

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Optional

import numpy as np

from . import interventions as interventions_lib
from . import ops
from .config import ModelConfig

Recorder = Optional[Callable[[str, np.ndarray, Optional[int]], None]]
F32 = np.float32


def _noop(name: str, value: np.ndarray, layer: Optional[int] = None) -> None:
    pass


_noop.keeps_scores = lambda layer: False  # type: ignore[attr-defined]


def keeps_scores(record, layer: int) -> bool:
    # does this recorder keep layer's scores (scores_raw, scores)? If not, the pass may
    # overwrite them in place (same arithmetic, one n_head·n² buffer instead of three): a
    # recorder keeping nothing, or one deriving them from q and k when read (core/layer_detail.py).
    # Unknown recorders keep everything.
    wants = getattr(record, "keeps_scores", None)
    return True if wants is None else wants(layer)


def _record_kv(record, config: ModelConfig, name: str, kv: np.ndarray, layer: int) -> None:
    # k, v, k_unrotated [n_kv_head, n, d_head]: recorded repeated to every query head, or as
    # they are for a recorder that repeats them when read (`repeats_kv`: core/layer_detail.py)
    record(name, kv if getattr(record, "repeats_kv", False) else _repeat_kv(config, kv), layer)


def rows(params: Mapping[str, np.ndarray], name: str, index: np.ndarray) -> np.ndarray:
    # [n] ids -> [n, d]: rows of a table. A parameter store that reads lazily gathers only
    # these rows (a 128k-row bf16 table is not widened for a 20-token text).
    gather = getattr(params, "rows", None)
    return gather(name, index) if gather is not None else params[name][index]


def times_rows_transposed(x: np.ndarray, params: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    # [n, d] @ table[n_rows, d].T -> [n, n_rows], in row blocks where the store offers them
    blocks: Optional[Callable[[str], Iterator[tuple[int, np.ndarray]]]] = getattr(params, "row_blocks", None)
    if blocks is None:
        return x @ params[name].T
    out = np.empty((x.shape[0], params.shape(name)[0]), dtype=F32)
    for start, block in blocks(name):
        out[:, start:start + len(block)] = x @ block.T
    return out


@dataclass(frozen=True)
class Context:
    """What every layer's attention needs besides its input: the additive mask (0 / -inf, or
    None) and, for rotary models, cos and sin of every position's angles [n_seq, d_rotary // 2].
    A model whose layers differ (local_layers: Gemma 2/3) has the local layers' own in `local`;
    layer_context picks a layer's."""
    mask: Optional[np.ndarray]
    cos: Optional[np.ndarray] = None
    sin: Optional[np.ndarray] = None
    interventions: tuple = ()          # core/interventions.py: what this pass changes
    local: Optional["Context"] = None  # the local layers' mask (window) and angles (local base)
    scale: Optional[float] = None      # what scores are multiplied by (None: 1/√d_head; T5: 1)


def attention_mask(config: ModelConfig, n_seq: int, start: int = 0,
                   local: bool = False) -> Optional[np.ndarray]:
    # -> [n_seq - start, n_seq] additive (0 where a query may look, -inf where not), or None (no
    # mask): the rows of queries start.. (all of them unless extending a cached text).
    # The additive form is one broadcast add instead of a boolean scatter. With local_layers
    # the window is the local layers' (local=True) only; else every layer's.
    if not config.causal:
        return None
    window = config.sliding_window if local or not config.local_layers else 0
    if window and window < n_seq:
        blocked = ops.windowed_causal_mask(n_seq, window)
    else:
        blocked = ops.causal_mask(n_seq)
    return ops.additive_mask(blocked[start:])


def rope_frequencies(config: ModelConfig, n_seq: int = 0, local: bool = False) -> np.ndarray:
    # [d_rotary // 2]: radians per position of each rotated pair, for a text of n_seq tokens
    # (dynamic and longrope scaling change with the length; 0: a short text's); local=True: the
    # local layers' own base, unscaled, where the model has one (Gemma 3's rope_local_base_freq)
    d, theta, kind = config.d_rotary, config.rope_theta, config.rope_scaling
    if local and config.rope_local_theta:
        return ops.rope_frequencies(d, config.rope_local_theta)
    if kind == "dynamic":
        return ops.dynamic_rope_frequencies(d, theta, config.rope_factor, config.rope_original_n_ctx, n_seq)
    if kind == "yarn":
        return ops.yarn_rope_frequencies(d, theta, config.rope_factor, config.rope_original_n_ctx,
                                         config.rope_beta_fast, config.rope_beta_slow, config.rope_truncate)
    if kind == "longrope":
        long = n_seq > config.rope_original_n_ctx
        return ops.longrope_frequencies(d, theta, config.rope_long_factor if long else config.rope_short_factor)
    return ops.rope_frequencies(d, theta, kind, config.rope_factor, config.rope_low_freq_factor,
                                config.rope_high_freq_factor, config.rope_original_n_ctx)


def rope_length_key(config: ModelConfig, n_seq: int):
    """What of a text's length its rotary frequencies depend on: None for most models; for
    dynamic and longrope scaling, past the original context, the length itself (dynamic) or
    just that it is past (longrope). Rows computed at lengths with different keys differ,
    so a KV cache or shared rows are reused only under the same key (else: re-traced)."""
    if config.position != "rotary" or n_seq <= config.rope_original_n_ctx:
        return None
    if config.rope_scaling == "dynamic":
        return n_seq
    return "long" if config.rope_scaling == "longrope" else None


def rope_cos_sin(config: ModelConfig, angles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # [n, d_rotary // 2] angles -> cos, sin; yarn and longrope multiply both by their attention
    # factor (so rotated q·k grows by its square), as transformers does
    cos, sin = np.cos(angles), np.sin(angles)
    if config.rope_attention_factor != 1.0:
        factor = F32(config.rope_attention_factor)
        cos, sin = cos * factor, sin * factor
    return cos, sin


def context(config: ModelConfig, n_seq: int, record: Recorder = None, start: int = 0,
            interventions: tuple = ()) -> Context:
    """For queries at positions start..n_seq-1 over keys 0..n_seq-1 (start > 0: extending a
    text whose earlier keys and values are cached)."""
    mask = attention_mask(config, n_seq, start)
    local = _local_context(config, n_seq, record, start, interventions) if config.local_layers else None
    if config.position != "rotary" or interventions_lib.no_positions(interventions):
        return Context(mask, interventions=interventions, local=local)
    angles = _angles(config, n_seq, start, interventions, local=False)
    if record is not None:
        record("rope_angles", angles, None)
    return Context(mask, *rope_cos_sin(config, angles), interventions, local)


def _angles(config: ModelConfig, n_seq: int, start: int, interventions: tuple, local: bool) -> np.ndarray:
    # [n_seq - start, d_rotary // 2]: the rotation angles of positions start.. (as permuted)
    angles = ops.rope_angles(n_seq, rope_frequencies(config, n_seq, local))[start:]
    order = interventions_lib.position_order(interventions, n_seq)
    return angles if order is None else angles[order]


def _local_context(config: ModelConfig, n_seq: int, record, start: int, interventions: tuple) -> Context:
    # the local layers' mask (their window) and angles (their rope base, when it differs)
    mask = attention_mask(config, n_seq, start, local=True)
    if config.position != "rotary" or interventions_lib.no_positions(interventions):
        return Context(mask, interventions=interventions)
    angles = _angles(config, n_seq, start, interventions, local=True)
    if record is not None and config.rope_local_theta:
        record("rope_angles_local", angles, None)
    return Context(mask, *rope_cos_sin(config, angles), interventions)


def layer_context(config: ModelConfig, ctx: Context, layer: int) -> Context:
    """The mask and angles this layer uses: a local layer's window and rope base (Gemma 2/3),
    no rotation on a NoPE layer (SmolLM3); ctx itself where every layer is alike."""
    if ctx.local is not None and config.is_local(layer):
        ctx = ctx.local
    if ctx.cos is not None and not config.has_rope(layer):
        ctx = dataclasses.replace(ctx, cos=None, sin=None)
    return ctx


class KVCache:
    """Every layer's keys and values (after the rotation, before GQA's repeat), per position:
    what a causal model reuses when the text grows by a token. Extending returns a new cache,
    so the trace it came from (undo) keeps its own."""

    def __init__(self, n_layer: int, keys=None, values=None) -> None:
        self.keys: list[Optional[np.ndarray]] = list(keys) if keys else [None] * n_layer
        self.values: list[Optional[np.ndarray]] = list(values) if values else [None] * n_layer

    @property
    def n_seq(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[1]

    def append(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # [n_kv, m, d_head] new rows -> every row so far; stored read-only
        if self.keys[layer] is not None:
            k = np.concatenate([self.keys[layer], k], axis=1)
            v = np.concatenate([self.values[layer], v], axis=1)
        k.flags.writeable = v.flags.writeable = False
        self.keys[layer], self.values[layer] = k, v
        return k, v

    def copy(self) -> "KVCache":
        return KVCache(len(self.keys), self.keys, self.values)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in [*self.keys, *self.values] if a is not None)


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
    return _repeat_kv_heads(x, config.group_size)


def _repeat_kv_heads(x: np.ndarray, group: int) -> np.ndarray:
    return np.repeat(x, group, axis=0) if group > 1 else x


def _bias(params, name: str, present: bool) -> Optional[np.ndarray]:
    return params[name] if present else None


# The attention stages, each one picoGPT-short function (core/stages.py names them; the
# stepper's views, provenance and the README point at them). `attention` below runs them in
# order and adds what is not math: recording, the KV cache, in-place buffers, interventions.

def project_heads(params, config: ModelConfig, x, layer: int, name: str, n_heads: int):
    # [n_seq, d_model] -> [n_heads, n_seq, d_head]: x·W + b of one of q, k, v, split into heads
    p = f"h.{layer}.attn.{name}"
    return ops.split_heads(ops.linear(x, params[p + ".w"], _bias(params, p + ".b", config.qkv_bias)),
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
    # computed as Hugging Face does)
    if config.query_scale:
        return F32(config.query_scale ** -0.5)
    return F32(1.0 / np.sqrt(config.d_head))


def dot_products(q, k):
    # [n_head, n_q, d_head], [n_head, n_k, d_head] -> [n_head, n_q, n_k]: q·kᵀ ("scores_raw")
    return q @ k.transpose(0, 2, 1)


def soft_cap(x, cap, out=None):
    # [...] -> cap · tanh(x / cap): squeezed into (-cap, cap), nearly x where |x| << cap
    # (Gemma 2's attention and final logit soft-capping; the order of Hugging Face's ops)
    capped = np.divide(x, F32(cap), out=out)
    np.tanh(capped, out=capped)
    capped *= F32(cap)
    return capped


def scale_and_mask(raw, scale, mask, out=None, cap: float = 0.0):
    # [n_head, n_q, n_k] -> raw · scale (soft-capped when cap > 0) + mask (0 where a query may
    # look, -inf where not)
    scaled = np.multiply(raw, scale, out=out)
    if cap:
        scaled = soft_cap(scaled, cap, out=scaled)
    if mask is not None:
        scaled += mask
    return scaled


def scores(q, k, scale, mask, cap: float = 0.0):
    # Stage 6. [n_head, n_q, d_head], [n_head, n_k, d_head], [n_q, n_k] -> [n_head, n_q, n_k]
    return scale_and_mask(dot_products(q, k), scale, mask, cap=cap)


def attention_weights(scores, out=None):
    # Stage 7. [n_head, n_q, n_k] -> softmax over the keys: each row sums to 1
    return ops.softmax(scores, out=out)


def weighted_sum(weights, v):
    # Stage 8. [n_head, n_q, n_k], [n_head, n_k, d_head] -> [n_head, n_q, d_head]: Σ_j w_ij v_j
    return weights @ v


def output_projection(params, config: ModelConfig, heads_concat, layer: int):
    # Stage 9. [n_seq, n_head * d_head] -> [n_seq, d_model]: concat(heads)·W_O + b
    p = f"h.{layer}.attn."
    return ops.linear(heads_concat, params[p + "o.w"], _bias(params, p + "o.b", config.o_bias))


def _tempered_weights(scores, temperatures: dict) -> np.ndarray:
    # the temperature intervention: softmax(scores / T) for the heads it names
    tempered = scores.copy()
    for head, temperature in temperatures.items():
        tempered[head] /= F32(temperature)
    return attention_weights(tempered, out=tempered)


def _ablate(head_outputs, ablations: dict) -> None:
    # the ablation intervention, in place, before W_O (as a hook on o_proj would)
    for head, mode in ablations.items():
        head_outputs[head] = 0 if mode == "zero" else head_outputs[head].mean(axis=0)


def attention(params, config: ModelConfig, x, ctx: Context, layer: int, record,
              cache: Optional[KVCache] = None) -> np.ndarray:
    # [n_seq, d_model] -> [n_seq, d_model]: stages 5-9 in order. With a cache, x holds only
    # the newest rows: their keys and values are appended to the cached ones and their
    # queries read all of them.
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
    if temperatures:
        weights = _tempered_weights(scaled, temperatures)
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


def feed_forward(params, config: ModelConfig, x, layer: int, record) -> np.ndarray:
    # Stage 10. [n_seq, d_model] -> [n_seq, d_model]: proj(act(fc(x))), or gated: proj(act(gate(x)) * up(x))
    p = f"h.{layer}.mlp."
    activation = ops.ACTIVATIONS[config.activation]
    record("mlp_in", x, layer)
    first = "gate" if config.gated_mlp else "fc"
    pre_act = ops.linear(x, params[p + first + ".w"], _bias(params, p + first + ".b", config.mlp_bias))
    record("mlp_pre_act", pre_act, layer)                  # [n_seq, d_ff]; the gate when gated
    act = activation(pre_act)
    record("mlp_act", act, layer)
    if config.gated_mlp:
        up = ops.linear(x, params[p + "up.w"], _bias(params, p + "up.b", config.mlp_bias))
        record("mlp_up", up, layer)
        act = act * up
        record("mlp_gated", act, layer)                    # what the down projection reads
    out = ops.linear(act, params[p + "proj.w"], _bias(params, p + "proj.b", config.mlp_bias))
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
    m = feed_forward(params, config, m, layer, record)
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
        x = x + feed_forward(params, config, _norm(params, config, "ln_2", x, layer, record), layer, record)
        record("mlp_residual", x, layer)
    else:
        x = x + attention(params, config, x, ctx, layer, record, cache)
        record("attn_residual", x, layer)
        x = _norm(params, config, "ln_1", x, layer, record)
        x = x + feed_forward(params, config, x, layer, record)
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
    mlp_out = feed_forward(params, config, _norm(params, config, "ln_2", x, layer, record), layer, record)
    x = x + attn_out
    record("attn_residual", x, layer)
    x = x + mlp_out
    record("mlp_residual", x, layer)
    return x


def head_input(config: ModelConfig, h: np.ndarray) -> np.ndarray:
    # [..., d_model] -> what the output head multiplies: all of h, or, when the head is tied to
    # a concat model's wte [n_vocab, d_token], its token part h[..., :d_token]
    return h[..., :config.d_token] if config.tied_head and config.d_token != config.d_model else h


def output_direction(params, config: ModelConfig, token_id: int) -> np.ndarray:
    """[d_model]: the vector whose dot product with the head's input is token_id's logit (a
    row of wte or lm_head.w; zero over a tied concat model's position part, which the head
    does not read)."""
    row = rows(params, head_table(config), np.array([token_id]))[0]
    if row.shape[-1] == config.d_model:
        return row
    return np.concatenate([row, np.zeros(config.d_model - row.shape[-1], dtype=row.dtype)])


def head_hidden(params, config: ModelConfig, h, record) -> np.ndarray:
    # [n_seq, d_model] -> [n_seq, d_model]: what the vocabulary product reads (BERT's masked-LM
    # head first transforms h: dense, activation, LayerNorm; recorded as head_transform)
    if not config.lm_head_transform:
        return h
    t = ops.linear(h, params["head.transform.w"], params["head.transform.b"])
    t = ops.ACTIVATIONS[config.activation](t)
    _, h = ops.layer_norm(t, params["head.ln.g"], params["head.ln.b"], config.ln_eps)
    record("head_transform", h, None)
    return h


def head_table(config: ModelConfig) -> str:
    """The parameter the output head multiplies by: wte (tied) or the model's own lm_head.w."""
    return "wte" if config.tied_head else "lm_head.w"


def head_product(params, config: ModelConfig, h) -> np.ndarray:
    # [n, d_model] -> [n, n_vocab]: h times the head's table, no bias (linear in h). Concat
    # models with a tied head read only the token part (see head_input)
    return times_rows_transposed(head_input(config, h), params, head_table(config))


def vocabulary_logits(params, config: ModelConfig, h) -> np.ndarray:
    # [n, d_model] (head_hidden's output) -> [n, n_vocab]: the decoder tied to wte, or the
    # model's own head, plus the MLM head's bias
    logits = head_product(params, config, h)
    if config.lm_head_transform and "head.bias" in params:
        logits += params["head.bias"]
    if config.final_softcap:                                # Gemma 2: cap·tanh(logits / cap)
        logits = soft_cap(logits, config.final_softcap, out=logits)
    return logits


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


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter the forward pass reads, with its shape (loaders check against it)."""
    d, f, dh = config.d_model, config.d_ff, config.d_head
    d_q, d_kv = config.n_head * dh, config.n_kv_heads * dh
    shapes: dict[str, tuple[int, ...]] = {"wte": (config.n_vocab, config.d_token)}
    if config.position == "learned":
        shapes["wpe"] = (config.position_offset + config.n_ctx, d)
    if config.n_token_types:
        shapes["wtt"] = (config.n_token_types, d)
    if config.embed_norm:
        shapes.update({"ln_emb.g": (d,), "ln_emb.b": (d,)})

    def linear(name: str, d_in: int, d_out: int, bias: bool) -> None:
        shapes[name + ".w"] = (d_in, d_out)
        if bias:
            shapes[name + ".b"] = (d_out,)

    def norm_shapes(name: str) -> None:
        shapes[name + ".g"] = (d,)
        if config.norm_kind == "layer":
            shapes[name + ".b"] = (d,)

    for i in range(config.n_layer):
        p = f"h.{i}."
        linear(p + "attn.q", d, d_q, config.qkv_bias)
        linear(p + "attn.k", d, d_kv, config.qkv_bias)
        linear(p + "attn.v", d, d_kv, config.qkv_bias)
        linear(p + "attn.o", d_q, d, config.o_bias)
        if config.qk_norm:
            whole = config.qk_norm_over == "projection"
            shapes.update({p + "attn.q_norm.g": (d_q if whole else dh,),
                           p + "attn.k_norm.g": (d_kv if whole else dh,)})
        if config.norms_branch_input or config.norm == "post":
            norm_shapes(p + "ln_1")
            norm_shapes(p + "ln_2")
        if config.norms_branch_output:
            norm_shapes(p + "post_attn_ln")
            norm_shapes(p + "post_mlp_ln")
        for name in (("gate", "up") if config.gated_mlp else ("fc",)):
            linear(p + "mlp." + name, d, f, config.mlp_bias)
        linear(p + "mlp.proj", f, d, config.mlp_bias)
    if config.final_norm:
        norm_shapes("ln_f")
    if config.lm_head and not config.tied_head:
        shapes["lm_head.w"] = (config.n_vocab, d)
    if config.lm_head_transform:
        shapes.update({"head.transform.w": (d, d), "head.transform.b": (d,),
                       "head.ln.g": (d,), "head.ln.b": (d,), "head.bias": (config.n_vocab,)})
    return shapes
