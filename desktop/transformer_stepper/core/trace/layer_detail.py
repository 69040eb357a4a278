"""One layer's detail as a trace keeps it: the arrays the forward pass made, less those one
cheap step away from the kept ones, which are derived, by the pass's own stage functions, when
read (so they are the pass's bits; tests/core/test_layer_detail.py).

Kept (a layer recorded by core/trace/recorder.py's Recorder(derive=True), i.e. every Model trace):
  attn_weights [n_head, n_q, n_k]   the only n_head·n² array (not kept in a per-head layer)
  q [n_head, n, d_head]             non-rotary layers; rotary ones keep q_unrotated instead
  k, v [n_kv_head, n, d_head]       per K/V head, not repeated to every query head; rotary
  k_unrotated [n_kv_head, n, d_head]  layers keep k_unrotated instead of k
  every other per-layer array (attn_in, head_outputs, norms, feed-forward ...) as recorded
Derived when read (whole layer, or one head):
  q, k = rotate(q_unrotated), rotate(k_unrotated) (rotary); k, v, k_unrotated repeated to the
  query heads; scores_raw = q·kᵀ, scores_uncapped = scores_raw·scale (soft-capped models),
  scores = scale_and_mask(scores_raw); attn_weights = softmax(scores) in a per-head layer (with
  attention sinks, the rule's sink logits join each row's softmax: forward.attention_weights).
A layer of a causal trace made by several passes (core/trace/row_blocks.py: an edit, a generated
token) keeps the same arrays (lean_blocks) and derives the scores block by block: each block's
rows over its keys as its pass computed them, the earlier rows' later keys as the pass masks
them (AttentionRule.of_blocks); so it can be kept per head too.
A whole-layer read computes the array and does not keep it; a head's read keeps the derived
arrays of the last head read (`memo_limit` bytes at most). A layer made from a plain dict
(seq2seq, a Recorder without derive) keeps everything and derives nothing."""
from __future__ import annotations

import threading
from typing import Iterator, Mapping, Optional

import numpy as np

from ..model import ops, rotary
from ..model.config import ModelConfig

DERIVED = ("scores_raw", "scores_uncapped", "scores")   # never kept by a deriving recorder
PER_KV = ("k_unrotated", "k", "v")                      # kept per K/V head by a deriving recorder
PER_HEAD = ("q_unrotated", "k_unrotated", "q", "k", "v", "scores_raw", "scores_uncapped",
            "scores", "attn_weights", "head_outputs")   # arrays whose first axis is the head


class AttentionRule:
    """What a layer's derived attention arrays need besides the kept ones: its mask, rotary
    angles, scale, soft cap, K/V group size and head temperatures (interventions)."""

    def __init__(self, config: ModelConfig, ctx, layer: int, sinks: Optional[np.ndarray] = None) -> None:
        from ..model import forward, interventions

        ctx = forward.layer_context(config, ctx, layer)
        self.mask, self.cos, self.sin = ctx.mask, ctx.cos, ctx.sin
        self.scale = forward.attention_scale(config) if ctx.scale is None else forward.F32(ctx.scale)
        self.cap = config.attn_softcap
        self.group = config.group_size
        self.n_head = config.n_head
        self.temperatures = interventions.head_edits(ctx.interventions, layer)[1]
        self.config, self.layer = config, layer
        self.sinks = sinks                      # [n_head] attention sink logits (gpt-oss), or None
        self.blocks: Optional[tuple[tuple[int, int, int], ...]] = None   # one pass over every row

    @classmethod
    def of_blocks(cls, config: ModelConfig, ctx, layer: int, spans, sinks=None) -> "AttentionRule":
        """A layer computed by several passes: `spans` (start, end, extent), each pass's rows
        start..end over `extent` positions (row_blocks.spans); ctx: the whole text's (its
        angles turn a row as the row's own pass did)."""
        rule = cls(config, ctx, layer, sinks)
        rule.blocks = tuple(spans)
        return rule

    def head_mask(self, head: Optional[int]) -> Optional[np.ndarray]:
        if self.mask is None or head is None or self.mask.ndim < 3:
            return self.mask
        return self.mask[head:head + 1]

    def pair(self, name: str, raw: np.ndarray, head: Optional[int]) -> np.ndarray:
        """raw = q·kᵀ [n_head or 1, n_q, n_k] -> the (query, key) array `name` as attend
        records it, by the pass's own stage functions (head: that head's, in its place among
        the whole layer's softmax rows)."""
        from ..model import forward

        if name == "scores_raw":
            return raw
        if name == "scores_uncapped":
            return np.multiply(raw, self.scale)
        scores = forward.scale_and_mask(raw, self.scale, self.head_mask(head), cap=self.cap)
        if name == "scores":
            return scores
        if name != "attn_weights":
            raise KeyError(f"{name!r} is not kept and cannot be derived")
        if head is None:                                # as the pass: forward.attend
            if self.temperatures:
                return forward.tempered_weights(scores, self.temperatures, self.sinks)
            return forward.attention_weights(scores, sinks=self.sinks)
        sink = None if self.sinks is None else np.array(self.sinks[head:head + 1], dtype=forward.F32)
        if head in self.temperatures:                   # (tempered_weights, one head)
            scores /= forward.F32(self.temperatures[head])
            if sink is not None:
                sink /= forward.F32(self.temperatures[head])
        n_q = scores.shape[1]                           # the rows of the whole layer's softmax
        if sink is None:
            return ops.softmax_rows_of(scores[0], head * n_q, self.n_head * n_q)[None]
        rows = ops.softmax_rows_of(forward.with_sink_column(scores, sink)[0], head * n_q, self.n_head * n_q)
        return np.ascontiguousarray(rows[:, :-1])[None]   # (the sink's column dropped)


def _frozen(value: np.ndarray) -> np.ndarray:
    value.flags.writeable = False
    return value


class LayerDetail(Mapping):
    """name -> the layer's whole array (kept, or derived now); `head(name, h)` -> one head's.
    `recorded`: name -> array, or None for a name the pass made but the recorder derives (its
    place keeps the pass's order of names)."""

    def __init__(self, recorded: Mapping[str, Optional[np.ndarray]],
                 rule: Optional[AttentionRule] = None) -> None:
        self._names = tuple(recorded)
        self.kept = {name: _frozen(value) for name, value in recorded.items() if value is not None}
        self.rule = rule
        self.memo_limit = 0                # bytes of one head's derived arrays kept (LayerCache)
        self._memo: dict[tuple[str, int], np.ndarray] = {}
        self._rows: dict[tuple[str, int], np.ndarray] = {}      # the last rows() read a head at a time
        self._lock = threading.Lock()

    @property
    def per_head(self) -> bool:
        """The n_head·n² weights are not kept: every head's are computed when read."""
        return "attn_weights" in self._names and "attn_weights" not in self.kept

    def headwise(self) -> "LayerDetail":
        """This layer without its whole attention weights (derived per head when read), or
        itself when it has none to drop or cannot derive them."""
        if self.rule is None or "attn_weights" not in self.kept:
            return self
        recorded = {name: self.kept.get(name) for name in self._names}
        recorded["attn_weights"] = None
        return LayerDetail(recorded, self.rule)

    def rows(self, name: str, row: int) -> np.ndarray:
        """[n_head, ...]: row `row` of every head's array, a head at a time where it is derived
        (every head's n², so seconds for a long text: `rows_ready` says whether it is known)."""
        if name in self.kept and not self._repeats(name):
            return self.kept[name][:, row]
        with self._lock:
            known = self._rows.get((name, row))
        if known is not None:
            return known
        n_head = self.rule.n_head if self.rule is not None else len(self.kept["head_outputs"])
        value = _frozen(np.stack([self.head(name, head)[row] for head in range(n_head)]))
        with self._lock:
            self._rows = {(name, row): value}
        return value

    def rows_ready(self, name: str, row: int) -> bool:
        """Whether rows(name, row) is kept or was read last (costs nothing now)."""
        with self._lock:
            return (name in self.kept and not self._repeats(name)) or (name, row) in self._rows

    # -- Mapping (compared and hashed as an object: its arrays are not compared) -------------
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name) -> bool:
        return name in self._names

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._names:
            raise KeyError(name)
        return self._array(name, None)

    def head(self, name: str, head: int) -> np.ndarray:
        """[...] one head's array of `name` (a PER_HEAD name): for a derived one, only that
        head's is computed (and kept until another head is read, within memo_limit)."""
        if name not in self._names:
            raise KeyError(name)
        if name in self.kept and not self._repeats(name):
            return self.kept[name][head]
        with self._lock:
            known = self._memo.get((name, head))
        if known is not None:
            return known
        value = self._array(name, head)
        with self._lock:
            if any(h != head for _, h in self._memo):
                self._memo.clear()
            if sum(a.nbytes for a in self._memo.values()) + value.nbytes <= self.memo_limit:
                self._memo[(name, head)] = value
        return value

    def nbytes(self) -> int:
        """Bytes held: the kept arrays (an alias counted once) and the last head's derived ones."""
        seen = {id(value): value.nbytes for value in self.kept.values()}
        with self._lock:
            return sum(seen.values()) + sum(a.nbytes for a in self._memo.values())

    # -- derivation ------------------------------------------------------------------------
    def _repeats(self, name: str) -> bool:
        return self.rule is not None and name in PER_KV

    def _array(self, name: str, head: Optional[int]) -> np.ndarray:
        # head None: [n_head, ...] the whole layer's; else [...] head `head`'s
        if name in self.kept and not self._repeats(name):
            return self.kept[name] if head is None else self.kept[name][head]
        value = self._derive(name, head)
        return _frozen(value if head is None else value[0])

    def _derive(self, name: str, head: Optional[int]) -> np.ndarray:
        # -> [n_head, ...] (head None) or [1, ...] (that head's), by the pass's stage functions
        from ..model import forward

        rule = self.rule
        if rule is None:
            raise KeyError(f"{name!r} is not kept and this layer derives nothing")
        if name in PER_KV and name in self.kept:        # per K/V head -> per query head
            kv = self.kept[name]
            if head is None:
                return forward.repeat_kv_heads(kv, rule.group)
            return kv[head // rule.group][None]
        if name in ("q", "k"):
            source = self.kept[f"{name}_unrotated"]
            if name == "k":
                source = source if head is None else source[head // rule.group][None]
            elif head is not None:
                source = source[head:head + 1]
            turned = source if rule.cos is None else rotary.turn(rule.config, source, rule.cos, rule.sin)
            return forward.repeat_kv_heads(turned, rule.group) if name == "k" and head is None else turned
        q, k = self._derive_or_kept("q", head), self._derive_or_kept("k", head)
        if rule.blocks is not None:
            return self._by_blocks(name, q, k, head)
        return rule.pair(name, forward.dot_products(q, k), head)

    def _by_blocks(self, name: str, q: np.ndarray, k: np.ndarray, head: Optional[int]) -> np.ndarray:
        # [n_head or 1, n, n] as the passes made it (row_blocks.layer_detail): a block's rows
        # over keys 0..extent from a pass over `extent` positions (rows past `end` zeros: a row's
        # product reads only its own q), then the earlier rows' columns of the block's keys as
        # the pass masks later keys (forward.later_keys)
        from ..model import forward
        from ..model.layer_context import context

        rule = self.rule
        n = q.shape[1]
        out = np.empty((q.shape[0], n, n), dtype=q.dtype)
        for start, end, extent in rule.blocks:
            block = AttentionRule(rule.config, context(rule.config, extent, start=start), rule.layer, rule.sinks)
            raw = forward.dot_products(_rows(q, start, end, extent - start), _rows(k, 0, extent, extent))
            out[:, start:end, :end] = block.pair(name, raw, head)[:, :end - start, :end]
            if start:
                later = forward.later_keys(rule.config, np.ascontiguousarray(q[:, :start]),
                                           _rows(k, start, extent, extent - start), (name,), start, extent - start)
                out[:, :start, start:end] = later[name][:, :, :end - start]
        return out

    def _derive_or_kept(self, name: str, head: Optional[int]) -> np.ndarray:
        # q or k as the scores read them: [n_head, n, d_head] or [1, n, d_head]
        if name in self.kept and not self._repeats(name):
            value = self.kept[name]
            return value if head is None else value[head:head + 1]
        return self._derive(name, head)


def _rows(x: np.ndarray, start: int, stop: int, n: int) -> np.ndarray:
    # [heads, n, d]: rows start..stop of x (those it has), then zero rows up to n
    out = np.zeros((x.shape[0], n, x.shape[2]), dtype=x.dtype)
    have = x[:, start:min(stop, x.shape[1])]
    out[:, :have.shape[1]] = have
    return out


def lean_blocks(detail, config: ModelConfig, ctx, layer: int, spans, sinks=None) -> LayerDetail:
    """A layer of a trace made by several passes (row_blocks: every array as the passes
    recorded it, or a LayerDetail already) kept as a one-pass layer is: the (query, key) arrays
    other than the weights, q and k after rotation and k, v repeated are derived when read
    (the scores block by block: AttentionRule.of_blocks)."""
    if isinstance(detail, LayerDetail):
        return detail
    rule = AttentionRule.of_blocks(config, ctx, layer, spans, sinks)
    per_kv: dict[int, np.ndarray] = {}                # (an alias stays one array)
    recorded: dict[str, Optional[np.ndarray]] = {}
    for name, value in detail.items():
        unrotated = detail.get(f"{name}_unrotated")
        if value is None or name in DERIVED or (name in ("q", "k") and unrotated is not None
                                                and unrotated.shape == value.shape):
            value = None
        elif name in PER_KV and rule.group > 1:       # every group's heads are one K/V head
            if id(value) not in per_kv:
                per_kv[id(value)] = np.ascontiguousarray(value[::rule.group])
            value = per_kv[id(value)]
        recorded[name] = value
    return LayerDetail(recorded, rule)


def as_layer_detail(detail) -> LayerDetail:
    """A LayerDetail as it is; a plain dict of arrays as one that keeps them all."""
    return detail if isinstance(detail, LayerDetail) else LayerDetail(detail)


def detail_nbytes(detail) -> int:
    """One layer's detail in bytes; aliases (attn_in is ln_1_out in pre-LN blocks) count once,
    names kept as None (derived) count nothing."""
    if isinstance(detail, LayerDetail):
        return detail.nbytes()
    seen: dict[int, int] = {}
    for value in detail.values():
        if value is not None:
            seen[id(value)] = value.nbytes
    return sum(seen.values())
