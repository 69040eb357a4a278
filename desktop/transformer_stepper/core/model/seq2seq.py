"""The encoder–decoder pass ("Attention Is All You Need", T5, BART, Marian), made of forward.py's
stage functions: the encoder is forward.forward over the source; each decoder block is causal
self-attention (forward.attention, with the KV cache), then cross-attention, then the feed-
forward. Cross-attention is forward.attend too: q from the decoder stream, k and v projected
from the encoder's output once per source (cross_kv) and reused at every step, no causal mask.
Its arrays are recorded under the self-attention names with a "cross_" prefix.

Parameters (io/families/ map checkpoints onto them): the shared token table wte [n_vocab, d]
(and lm_head.w when untied, final_logits_bias [n_vocab] for BART and Marian); everything else
params.py names, under "encoder." or "decoder." (encoder.h.0.attn.q.w ...), plus per decoder
block decoder.h.{i}.cross.{q,k,v,o}.{w,b} and decoder.h.{i}.ln_cross.{g,b}, and for T5 the
relative position bias tables encoder.rel_bias, decoder.rel_bias [n_buckets, n_head]."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, Optional

import numpy as np

from . import ops
from .config import ModelConfig
from .errors import ModelError
from .forward import (
    _norm,
    _noop,
    attend,
    attention,
    embed,
    feed_forward,
    finish,
    forward,
    project_heads)
from .head import head_product
from .interventions import no_positions
from .kv_cache import KVCache
from .layer_context import Context
from .params import expected_shapes

F32 = np.float32
SHARED = ("wte", "lm_head.w", "final_logits_bias")   # names read from the top level by either stack


@dataclass(frozen=True)
class Seq2SeqConfig:
    """An encoder–decoder: two ordinary stacks (the decoder causal, with the output head) and
    what joins them. Every encoder–decoder field is here."""
    encoder: ModelConfig
    decoder: ModelConfig
    decoder_start_token_id: int
    eos_token_id: int
    pad_token_id: int = 0
    scale_scores: bool = True          # scores · 1/√d_head; T5 folds it into its weights
    relative_buckets: int = 0          # T5's relative position bias buckets (0: none)
    relative_max_distance: int = 128   # ... and the distance where the last bucket begins
    head_scale: float = 1.0            # T5's tied head reads h · d_model^-0.5
    logits_bias: bool = False          # final_logits_bias (BART, Marian)
    family: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if not self.decoder.causal or not self.decoder.lm_head:
            raise ModelError("config: an encoder–decoder's decoder must be causal with an output head")
        if self.encoder.d_model != self.decoder.d_model:
            raise ModelError(f"config: encoder d_model={self.encoder.d_model} differs from the "
                             f"decoder's {self.decoder.d_model}")
        for field in ("decoder_start_token_id", "eos_token_id", "pad_token_id"):
            value = getattr(self, field)
            if type(value) is not int or not 0 <= value < self.decoder.n_vocab:
                raise ModelError(f"config: {field}={value!r} is not a token id of the "
                                 f"{self.decoder.n_vocab}-token vocabulary")

    def replace(self, **changes) -> "Seq2SeqConfig":
        return dataclasses.replace(self, **changes)

    @property
    def scale(self) -> Optional[float]:
        """What scores are multiplied by (Context.scale): None = 1/√d_head."""
        return None if self.scale_scores else 1.0


class Scoped(Mapping):
    """One stack's view of the parameters under params.py's names: h.0.attn.q.w reads
    `prefix` + it (encoder.h.0.attn.q.w); names the stacks share (wte) are read as they are.
    `rename` = (old, new) swaps part of a name: the cross-attention view reads h.{i}.cross.q.w
    where forward.attend asks for h.{i}.attn.q.w."""

    def __init__(self, params: Mapping[str, np.ndarray], prefix: str,
                 rename: Optional[tuple[str, str]] = None) -> None:
        self.base, self.prefix, self.rename = params, prefix, rename

    def _name(self, name: str) -> str:
        if self.rename is not None:
            name = name.replace(*self.rename)
        return name if name in SHARED else self.prefix + name

    def __getitem__(self, name: str) -> np.ndarray:
        return self.base[self._name(name)]

    def __contains__(self, name) -> bool:
        return self._name(name) in self.base

    def __iter__(self):
        return (n[len(self.prefix):] for n in self.base if n.startswith(self.prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    @property
    def rows(self):
        gather = getattr(self.base, "rows", None)
        return None if gather is None else (lambda name, index: gather(self._name(name), index))

    @property
    def row_blocks(self):
        blocks = getattr(self.base, "row_blocks", None)
        return None if blocks is None else (lambda name: blocks(self._name(name)))

    def shape(self, name: str):
        return self.base.shape(self._name(name))


class _Prefixed:
    """A recorder that files every name under `prefix` (cross-attention's cross_q ...)."""

    def __init__(self, record, prefix: str) -> None:
        self.record, self.prefix = record, prefix

    def __call__(self, name: str, value: np.ndarray, layer: Optional[int] = None) -> None:
        self.record(self.prefix + name, value, layer)

    def keeps_scores(self, layer: int) -> bool:
        wants = getattr(self.record, "keeps_scores", None)
        return True if wants is None else wants(layer)


# -- relative position bias (T5) ------------------------------------------------------------
def relative_buckets(n_q: int, n_k: int, start: int, bidirectional: bool, n_buckets: int,
                     max_distance: int) -> np.ndarray:
    # -> [n_q, n_k] int64: T5's bucket of (key position - query position) for queries start..;
    # exact below n_buckets/4 (or /2 one-way), logarithmic up to max_distance, as HF computes
    relative = np.arange(n_k)[None, :] - np.arange(start, start + n_q)[:, None]
    buckets = np.zeros_like(relative)
    if bidirectional:
        n_buckets //= 2
        buckets += (relative > 0) * n_buckets
        relative = np.abs(relative)
    else:
        relative = -np.minimum(relative, 0)
    max_exact = n_buckets // 2
    # (the small distances take the exact branch; log of them, 0 included, is never used)
    far = np.maximum(relative, max_exact).astype(F32)
    large = max_exact + (np.log(far / F32(max_exact))
                         / F32(math.log(max_distance / max_exact))
                         * F32(n_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, n_buckets - 1)
    return buckets + np.where(relative < max_exact, relative, large)


def position_bias(params, config: Seq2SeqConfig, stack: str, n_q: int, n_k: int,
                  start: int = 0) -> np.ndarray:
    # -> [n_head, n_q, n_k]: the learned scalar per (head, bucket), added to every layer's
    # scores (computed once, in "the first layer", and shared by all, as T5 does)
    buckets = relative_buckets(n_q, n_k, start, stack == "encoder", config.relative_buckets,
                               config.relative_max_distance)
    return np.ascontiguousarray(params[f"{stack}.rel_bias"][buckets].transpose(2, 0, 1))


def padding_mask(valid: Optional[np.ndarray]) -> Optional[np.ndarray]:
    # [n_src] bool (True: a real token) -> [1, n_src] additive (0 / -inf), None when all are
    if valid is None or valid.all():
        return None
    return ops.additive_mask(~np.asarray(valid, bool))[None, :]


def _plus(a: Optional[np.ndarray], b: Optional[np.ndarray]) -> Optional[np.ndarray]:
    return b if a is None else a if b is None else (a + b).astype(F32)


# -- the contexts of the three attentions ---------------------------------------------------
def encoder_context(params, config: Seq2SeqConfig, n_src: int, valid=None, record=_noop,
                    interventions: tuple = ()) -> Context:
    """Bidirectional: the source's padding mask, plus T5's position bias (none when the
    interventions remove the source's positions)."""
    mask = padding_mask(valid)
    if config.relative_buckets and not no_positions(interventions):   # T5's only positions
        bias = position_bias(params, config, "encoder", n_src, n_src)
        record("encoder_position_bias", bias, None)
        mask = _plus(bias, mask)
    return Context(mask, interventions=interventions, scale=config.scale)


def decoder_context(params, config: Seq2SeqConfig, n_tgt: int, start: int = 0,
                    record=_noop, interventions: tuple = ()) -> Context:
    """Causal over the target so far (queries start..n_tgt-1), plus T5's one-way bias."""
    mask = ops.additive_mask(ops.causal_mask(n_tgt)[start:])
    if config.relative_buckets:
        bias = position_bias(params, config, "decoder", n_tgt - start, n_tgt, start)
        record("decoder_position_bias", bias, None)
        mask = _plus(bias, mask)
    return Context(mask, interventions=interventions, scale=config.scale)


def cross_context(config: Seq2SeqConfig, valid=None, interventions: tuple = ()) -> Context:
    """Every target position reads every (real) source position: no causal mask, no bias."""
    return Context(padding_mask(valid), interventions=interventions, scale=config.scale)


# -- the stages ------------------------------------------------------------------------------
def encode(params, config: Seq2SeqConfig, source_ids, ctx: Context, record=_noop,
           after_layer=None) -> np.ndarray:
    """[n_src] ids -> memory [n_src, d_model]: the encoder stack, run once per source."""
    return forward(Scoped(params, "encoder."), config.encoder, source_ids, None, record, ctx=ctx,
                   logits=False, after_layer=after_layer)["last_hidden_state"]


def cross_params(params) -> Scoped:
    """The decoder's cross-attention weights under the names forward.attend reads."""
    return Scoped(params, "decoder.", rename=(".attn.", ".cross."))


def cross_kv(params, config: Seq2SeqConfig, memory: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per decoder layer, k and v [n_head, n_src, d_head] of the encoder's output: computed once
    per source, then read by every decoding step."""
    weights, dec = cross_params(params), config.decoder
    return [(project_heads(weights, dec, memory, layer, "k", dec.n_kv_heads),
             project_heads(weights, dec, memory, layer, "v", dec.n_kv_heads))
            for layer in range(dec.n_layer)]


def cross_attention(params, config: ModelConfig, x, memory_kv, ctx: Context, layer: int,
                    record) -> np.ndarray:
    # [n_tgt, d_model], (k, v) of the memory -> [n_tgt, d_model]: q from the decoder stream,
    # k and v from the encoder output; the same attend as self-attention
    cross_record = _Prefixed(record, "cross_")
    cross_record("attn_in", x, layer)
    weights = Scoped(params, "", rename=(".attn.", ".cross."))   # params is the decoder's view
    q = project_heads(weights, config, x, layer, "q", config.n_head)
    k, v = memory_kv
    return attend(weights, config, q, k, v, ctx, layer, cross_record)


def decoder_block(params, config: ModelConfig, x, ctx: Context, cross_ctx: Context, memory_kv,
                  layer: int, record, cache: Optional[KVCache] = None) -> np.ndarray:
    # [n_tgt, d_model] -> [n_tgt, d_model]: self-attention (ln_1), cross-attention (ln_cross),
    # feed-forward (ln_2), each with its residual; norms before (pre-LN) or after (post-LN)
    record("layer_in", x, layer)
    pre = config.norm == "pre"
    sublayers = (("ln_1", "attn_residual", lambda h: attention(params, config, h, ctx, layer, record, cache)),
                 ("ln_cross", "cross_residual",
                  lambda h: cross_attention(params, config, h, memory_kv, cross_ctx, layer, record)),
                 ("ln_2", "mlp_residual", lambda h: feed_forward(params, config, h, layer, record)))
    for norm_name, residual_name, sublayer in sublayers:
        if pre:
            x = x + sublayer(_norm(params, config, norm_name, x, layer, record))
            record(residual_name, x, layer)
        else:
            x = x + sublayer(x)
            record(residual_name, x, layer)
            x = _norm(params, config, norm_name, x, layer, record)
    record("layer_out", x, layer)
    return x


def head_logits(params, config: Seq2SeqConfig, h: np.ndarray) -> np.ndarray:
    # [n, d_model] (after the decoder's final norm) -> [n, n_vocab]
    if config.head_scale != 1.0:
        h = h * F32(config.head_scale)
    logits = head_product(params, config.decoder, h)
    if config.logits_bias:
        logits += params["final_logits_bias"]
    return logits


def decode(params, config: Seq2SeqConfig, target_ids, memory_kv, cross_ctx: Context, record=_noop,
           cache: Optional[KVCache] = None, logits: bool = True, after_layer=None,
           interventions: tuple = ()) -> dict:
    """[n_new] decoder input ids (after the `cache`d ones) -> {"last_hidden_state", "logits"}.
    With a cache only the new positions are computed; their self-attention keys and values
    join the cache, and cross-attention reads the memory's k, v (memory_kv) as they are."""
    dec, dec_config = Scoped(params, "decoder."), config.decoder
    target_ids = np.asarray(target_ids, dtype=np.int64)
    start = cache.n_seq if cache is not None else 0
    ctx = decoder_context(params, config, start + len(target_ids), start, record, interventions)
    x = embed(dec, dec_config, target_ids, np.zeros_like(target_ids), record, start)
    for layer in range(dec_config.n_layer):
        x = decoder_block(dec, dec_config, x, ctx, cross_ctx, memory_kv[layer], layer, record, cache)
        if after_layer is not None:
            after_layer(layer)
    x = finish(dec, dec_config, x, record, logits=False)["last_hidden_state"]
    out = head_logits(params, config, x) if logits else None
    if out is not None:
        record("logits", out, None)
    return {"last_hidden_state": x, "logits": out}


def expected_seq2seq_shapes(config: Seq2SeqConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter the encoder–decoder pass reads, with its shape."""
    shapes: dict[str, tuple[int, ...]] = {}
    for stack, stack_config in (("encoder.", config.encoder), ("decoder.", config.decoder)):
        for name, shape in expected_shapes(stack_config).items():
            shapes[name if name in SHARED else stack + name] = shape
    dec = config.decoder
    d, d_q = dec.d_model, dec.n_head * dec.d_head
    for i in range(dec.n_layer):
        p = f"decoder.h.{i}."
        for name, (d_in, d_out) in (("q", (d, d_q)), ("k", (d, dec.n_kv_heads * dec.d_head)),
                                    ("v", (d, dec.n_kv_heads * dec.d_head)), ("o", (d_q, d))):
            shapes[f"{p}cross.{name}.w"] = (d_in, d_out)
            if dec.qkv_bias if name != "o" else dec.o_bias:
                shapes[f"{p}cross.{name}.b"] = (d_out,)
        shapes[p + "ln_cross.g"] = (d,)
        if dec.norm_kind == "layer":
            shapes[p + "ln_cross.b"] = (d,)
    if config.relative_buckets:
        shapes["encoder.rel_bias"] = (config.relative_buckets, config.encoder.n_head)
        shapes["decoder.rel_bias"] = (config.relative_buckets, dec.n_head)
    if config.logits_bias:
        shapes["final_logits_bias"] = (dec.n_vocab,)
    return shapes
