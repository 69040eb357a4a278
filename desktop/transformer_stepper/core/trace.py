"""The Trace: every intermediate of one forward pass, as plain read-only arrays, computed lazily.

The forward pass keeps the residual stream (each layer's input and output) and the whole-model
arrays (embeddings, final norm, logits). A layer's *detail* (q, k, v, scores, weights, head
outputs, norms, feed-forward arrays) is computed the first time it is asked for, by the same
block function from that layer's stored input (in a causal trace made by several passes, block
by block as they computed the rows: core/row_blocks.py), so it is bit-identical to recording it
during the pass; detailed layers are kept in a cache bounded by a byte budget and recomputed when
evicted. Memory therefore does not grow with n_layer · n_head · n_seq². A layer keeps one
n_head · n_seq² array (the weights; none when kept per head), q, k, v as projected, and derives
the scores when read (core/layer_detail.py); `trace.head_array(name, i, h)` reads one head.

Names follow Hugging Face where it has one (input_ids, hidden_states, attentions, logits).
`trace.layer(name, i)` is one layer's array; `trace[name]` stacks every layer (a full pass's
worth of detail and memory); see README "Trace arrays"."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Iterator, Optional

import numpy as np

from . import ops
from .config import ModelConfig
from .layer_detail import DERIVED, LayerDetail, as_layer_detail, detail_nbytes

# Per-layer names of the residual stream: kept by the pass itself, never recomputed.
RESIDUAL_NAMES = ("layer_in", "layer_out")
DEFAULT_DETAIL_BUDGET = 1 << 30      # bytes of layer detail a trace keeps (1 GiB)


class Recorder:
    """Collects what forward() records, by reference: the forward pass allocates a fresh
    array for every intermediate, so keeping it costs nothing, where copying every layer
    into a stacked buffer would double the memory traffic of a trace.

    `per_layer` limits which per-layer names are kept (None: all of them), except in the
    layers whose detail is recorded, whose every intermediate is kept in `details`: the
    `detail_layers` (the layer a view will show first), and, with a `budget` (bytes), every
    layer from the first on while the detail recorded so far plus one more layer fits it
    (the pass records them instead of each being computed again when visited). A layer's
    size is estimated from the largest layer recorded so far; before the first one, from
    `first_estimate` (a lower bound: the n_head·n² arrays); a layer that turns out not to
    fit is dropped when the next one begins.

    `derive`: the names of layer_detail.DERIVED this model's pass makes; a recorded layer keeps
    them as None (derived when read: core/layer_detail.py), takes k, v, k_unrotated per K/V
    head (`repeats_kv`), and keeps a rotary layer's q_unrotated, k_unrotated instead of q, k.
    The pass then computes its scores in place (keeps_scores is False). A requested layer over
    `per_head_over` bytes drops its weights when it ends (kept per head, as LayerCache would)."""

    def __init__(self, per_layer: Optional[tuple[str, ...]] = None,
                 detail_layers: tuple[int, ...] = (), budget: int = 0,
                 first_estimate: int = 0, derive: tuple[str, ...] = (), per_head_over: int = 0) -> None:
        if derive and per_layer is None:
            raise ValueError("a recorder keeping every layer's arrays derives none of them")
        self.keep = per_layer
        self.derive = derive
        self.repeats_kv = bool(derive)
        self.per_head_over = int(per_head_over)
        self.detail_layers = detail_layers
        self.budget = int(budget)
        self.first_estimate = int(first_estimate)
        self.arrays: dict[str, np.ndarray] = {}
        self.per_layer: dict[str, list[np.ndarray]] = {}
        self.details: dict[int, dict[str, np.ndarray]] = {i: {} for i in detail_layers}
        self._current: Optional[int] = None
        self._full = False                # the budget is spent: no more layers recorded

    def _enter(self, layer: int) -> None:
        """A layer begins: drop the last one if it did not fit, decide whether to record this one."""
        if layer == self._current:
            return
        self._settle()
        self._current = layer
        if self.keep is None or self._full or self.budget <= 0 or layer in self.details:
            return
        done = [d for i, d in self.details.items() if d]
        estimate = max([_detail_nbytes(d) for d in done] + [self.first_estimate])
        pending = sum(1 for i in self.detail_layers if i > layer)   # requested, still to come
        if sum(_detail_nbytes(d) for d in done) + estimate * (1 + pending) <= self.budget:
            self.details[layer] = {}
        else:
            self._full = True

    def _settle(self) -> None:
        previous = self._current
        if previous is None or previous not in self.details:
            return
        if previous in self.detail_layers:
            detail = self.details[previous]
            if (self.derive and self.per_head_over and detail.get("attn_weights") is not None
                    and _detail_nbytes(detail) > self.per_head_over):
                detail["attn_weights"] = None     # kept per head: each head's when read
            return
        if sum(_detail_nbytes(d) for d in self.details.values()) > self.budget:
            del self.details[previous]    # larger than estimated: computed on demand instead
            self._full = True

    def keeps_scores(self, layer: int) -> bool:
        self._enter(layer)
        return self.keep is None or (layer in self.details and not self.derive)

    def __call__(self, name: str, value: np.ndarray, layer: Optional[int] = None) -> None:
        if layer is None:
            self.arrays[name] = value
            return
        self._enter(layer)
        if layer in self.details:
            detail = self.details[layer]
            if self.derive and name in DERIVED:         # at scores_raw: each derived name's place
                for derived in self.derive:
                    detail.setdefault(derived, None)
            elif self.derive and name in ("q", "k") and _same_shape(detail.get(name + "_unrotated"), value):
                detail[name] = None                     # rotate(q_unrotated) when read
            else:
                detail[name] = value
        if self.keep is None or name in self.keep:
            self.per_layer.setdefault(name, []).append(value)

    def recorded(self) -> dict[int, dict[str, np.ndarray]]:
        """The recorded layers' detail, the requested layers last (kept first under the budget)."""
        self._settle()
        self._current = None
        extra = {i: d for i, d in self.details.items() if i not in self.detail_layers and d}
        return {**extra, **{i: self.details[i] for i in self.detail_layers if self.details.get(i)}}

    def finish(self) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, ...]]]:
        """-> (whole-model arrays, per-layer arrays), all frozen read-only."""
        for value in [*self.arrays.values(), *(v for vs in self.per_layer.values() for v in vs)]:
            value.flags.writeable = False
        return dict(self.arrays), {name: tuple(values) for name, values in self.per_layer.items()}


def _same_shape(a: Optional[np.ndarray], b: np.ndarray) -> bool:
    return a is not None and a.shape == b.shape


_detail_nbytes = detail_nbytes


class LayerCache:
    """Detailed layers by index, least recently used first, within a byte budget. A layer
    larger than the budget alone is kept per head (LayerDetail.headwise: without its
    n_head·n² weights, each head's derived when read, the last head read kept); only when even
    that exceeds the budget is the layer just computed kept over it. Thread-safe: the app
    prepares layers in a worker while the GUI thread reads them. A layer is computed outside
    the lock (reading a ready layer, its size or what is cached never waits for another layer's
    computation, 0.1 s at 512 tokens), and by one thread at a time: a second asker of the
    same layer waits for the first one's result."""

    def __init__(self, compute: Callable[[int], LayerDetail], budget: int) -> None:
        self._compute = compute
        self.budget = int(budget)
        self._layers: OrderedDict[int, LayerDetail] = OrderedDict()
        self._lock = threading.RLock()
        self._computing: dict[int, threading.Event] = {}   # layer -> set when its computation ends
        self.computed = 0                 # how many layer details were computed (evictions show)

    def put(self, layer: int, detail: LayerDetail) -> None:
        """A layer's detail recorded by the pass itself (identical to computing it)."""
        with self._lock:
            self._layers[layer] = self._fitted(detail)
            self._evict(keep=layer)

    def _fitted(self, detail: LayerDetail) -> LayerDetail:
        # per head when whole it alone exceeds the budget; one head's derived arrays kept
        # within what the budget leaves
        detail = as_layer_detail(detail)
        if detail.nbytes() > self.budget:
            detail = detail.headwise()
        detail.memo_limit = max(self.budget - detail.nbytes(), 0)
        return detail

    def trim(self, layer: int) -> None:
        """After reading a head of `layer` (its derived arrays kept): the others within the budget."""
        with self._lock:
            if layer in self._layers:
                self._evict(keep=layer)

    def get(self, layer: int) -> LayerDetail:
        while True:
            with self._lock:
                detail = self._layers.get(layer)
                if detail is not None:
                    self._layers.move_to_end(layer)
                    return detail
                running = self._computing.get(layer)
                if running is None:
                    done = self._computing[layer] = threading.Event()
                    break
            running.wait()      # then read it (or, had it failed or been evicted, compute it)
        try:
            detail = self._compute(layer)
            with self._lock:
                self.computed += 1
                detail = self._layers[layer] = self._fitted(detail)
                self._evict(keep=layer)
            return detail
        finally:
            with self._lock:
                del self._computing[layer]
            done.set()

    def set_budget(self, budget: int) -> None:
        """A new budget (the user's setting), applied at once: least recently used out first,
        the most recent layer kept."""
        with self._lock:
            self.budget = int(budget)
            if self._layers:
                newest = next(reversed(self._layers))
                self._evict(keep=newest)
                for layer, detail in self._layers.items():
                    self._layers[layer] = self._fitted(detail)

    def oversized(self) -> Optional[int]:
        """The layer kept although it alone exceeds the budget (even per head), else None."""
        with self._lock:
            if len(self._layers) == 1 and self.nbytes() > self.budget:
                return next(iter(self._layers))
            return None

    def has(self, layer: int) -> bool:
        with self._lock:
            return layer in self._layers

    def held(self) -> list[tuple[int, LayerDetail]]:
        """(layer, detail) of every kept layer, least recently used first; computes nothing."""
        with self._lock:
            return list(self._layers.items())

    def per_head(self) -> list[int]:
        """The layers kept per head (their weights computed a head at a time)."""
        with self._lock:
            return [layer for layer, detail in self._layers.items() if detail.per_head]

    def _evict(self, keep: int) -> None:
        while self.nbytes() > self.budget and len(self._layers) > 1:
            oldest = next(iter(self._layers))
            if oldest == keep:
                break
            del self._layers[oldest]

    def nbytes(self) -> int:
        with self._lock:
            return sum(_detail_nbytes(d) for d in self._layers.values())

    def layers(self) -> list[int]:
        with self._lock:
            return list(self._layers)

    def clear(self) -> None:
        with self._lock:
            self._layers.clear()


class Trace:
    """One text through one model. Whole-model arrays are in `arrays`; the residual stream in
    `residual[name][layer]`; every other per-layer array comes from `layer(name, i)`."""

    def __init__(self, config: ModelConfig, text: str, tokens: tuple[str, ...],
                 input_ids: np.ndarray, offsets: np.ndarray, special_tokens_mask: np.ndarray,
                 arrays: dict, residual: dict, compute_layer: Callable[[int], LayerDetail],
                 attention_mask: Optional[np.ndarray] = None, truncated: bool = False,
                 detail_budget: int = DEFAULT_DETAIL_BUDGET,
                 recorded_details: Optional[dict[int, LayerDetail]] = None,
                 kv_cache=None, generated: Optional[np.ndarray] = None,
                 computed_rows: Optional[int] = None, interventions: tuple = (),
                 logits_of=None, row_blocks: Optional[tuple[tuple[int, int], ...]] = None) -> None:
        self.config = config
        self.text = text
        self.tokens = tokens                 # the tokenizer's pieces, special tokens included
        self.input_ids = input_ids           # [n_seq] int64
        self.offsets = offsets               # [n_seq, 2] character span; (0, 0) for specials
        self.special_tokens_mask = special_tokens_mask   # [n_seq] bool
        self.arrays = arrays                 # name -> read-only array (whole-model ones)
        self.residual = residual             # "layer_in"/"layer_out" -> one array per layer
        self.truncated = truncated           # the text was longer than the model's context
        self.attention_mask = attention_mask  # [n_seq, n_seq] additive (0 / -inf) or None
        self.kv_cache = kv_cache             # decoders: every layer's keys and values (core/kv_cache.py)
        self.interventions = interventions   # what changed this pass (core/interventions.py)
        # [n_seq] bool: appended by generation (Model.extend), not typed
        self.generated = np.zeros(len(input_ids), bool) if generated is None else generated
        # how many positions the pass that made this trace computed (the rest came from the cache)
        self.computed_rows = len(input_ids) if computed_rows is None else computed_rows
        # causal traces: the (start, extent) row blocks its passes computed together, which its
        # layers' detail is computed by (core/row_blocks.py); None: one pass over every row
        self.row_blocks = row_blocks
        self.cache = LayerCache(compute_layer, detail_budget)
        # the output head (core.model.LogitHead): rows -> their logits [k, n_vocab], and its
        # inputs and table for logits_change_at; None: the model has no output head
        self._logits_of = logits_of
        self._logits_lock = threading.Lock()   # two threads asking first compute them once
        self._stacked: dict[str, np.ndarray] = {}
        self._layer_names: Optional[tuple[str, ...]] = None
        for value in (self.input_ids, self.offsets, self.special_tokens_mask, self.generated):
            value.flags.writeable = False
        for layer, detail in (recorded_details or {}).items():
            self.cache.put(layer, detail)

    def __repr__(self) -> str:
        return (f"Trace({self.config.family}, {self.n_seq} tokens, "
                f"{len(self.cache.layers())}/{self.config.n_layer} layers detailed)")

    # -- layers ---------------------------------------------------------------------------
    def detail(self, layer: int) -> LayerDetail:
        """Every per-layer array of one layer, computed on first use (then cached within the
        budget): what a view of one layer should ask for."""
        if not 0 <= layer < self.config.n_layer:
            raise IndexError(f"layer {layer} is out of range (the model has {self.config.n_layer})")
        return self.cache.get(layer)

    def prepare(self, layer: int) -> None:
        """Compute a layer's detail now (in a worker), so reading it later costs nothing."""
        self.detail(layer)

    def is_ready(self, layer: int) -> bool:
        return self.cache.has(layer)

    def layer(self, name: str, layer: int) -> np.ndarray:
        """One layer's array (e.g. layer("attn_weights", 2) -> [n_head, n_seq, n_seq])."""
        if name in self.residual:
            return self.residual[name][layer]
        detail = self.detail(layer)
        if name not in detail:
            raise KeyError(f"no per-layer array named {name!r} (known: {', '.join(detail)})")
        return detail[name]

    def head_array(self, name: str, layer: int, head: int) -> np.ndarray:
        """One head's array of one layer (head_array("scores", 2, 5) -> [n_seq, n_seq]): equal
        to layer(name, layer)[head] bit for bit, without computing the other heads' where the
        array is derived (scores) or the layer is kept per head (core/layer_detail.py)."""
        if not 0 <= head < self.config.n_head:
            raise IndexError(f"head {head} is out of range (the model has {self.config.n_head})")
        value = self.detail(layer).head(name, head)
        self.cache.trim(layer)
        return value

    def head_rows(self, name: str, layer: int, row: int) -> np.ndarray:
        """[n_head, ...]: row `row` (a query) of every head's array (attention weights of one
        token in every head), layer(name, layer)[:, row] bit for bit; in a layer kept per
        head, or for a derived array, a head at a time (one head's n² at once, not n_head's)."""
        rows = self.detail(layer).rows(name, row)
        self.cache.trim(layer)
        return rows

    def layer_names(self) -> tuple[str, ...]:
        """Per-layer names in the order the forward pass produces them."""
        if self._layer_names is None:
            self._layer_names = tuple(self.detail(0))
        return self._layer_names

    # -- Hugging Face's conventions -------------------------------------------------------
    @property
    def n_seq(self) -> int:
        return len(self.input_ids)

    @property
    def hidden_states(self) -> np.ndarray:
        """[n_layer + 1, n_seq, d_model]: embedding output, then every layer's output, the last
        with the final norm applied where the model has it (as output_hidden_states does)."""
        cached = self._stacked.get("hidden_states")
        if cached is None:
            layers = list(self.residual["layer_out"])
            if "final_ln_out" in self.arrays:
                layers[-1] = self.arrays["final_ln_out"]
            cached = np.stack([self.arrays["embedding_output"], *layers])
            cached.flags.writeable = False
            self._stacked["hidden_states"] = cached
        return cached

    @property
    def attentions(self) -> np.ndarray:
        """[n_layer, n_head, n_seq, n_seq] attention weights (softmax output). Computes every
        layer's detail: a full pass's time, and n_layer · n_head · n_seq² floats."""
        return self["attn_weights"]

    @property
    def has_logits(self) -> bool:
        return self._logits_of is not None

    @property
    def logits(self) -> Optional[np.ndarray]:
        """[n_seq, n_vocab], or None without an output head: computed on first use, then kept
        (every position × the whole vocabulary, often the largest array of a trace; what
        reads a few positions asks `logits_at`)."""
        if self._logits_of is None:
            return None
        cached = self._stacked.get("logits")
        if cached is None:
            with self._logits_lock:
                cached = self._stacked.get("logits")
                if cached is None:
                    cached = self._logits_of(slice(None))
                    cached.flags.writeable = False
                    self._stacked["logits"] = cached
        return cached

    def logits_at(self, rows) -> np.ndarray:
        """Logits at some positions without the whole array: an int -> [n_vocab] (negative
        counts from the end), a slice or index array -> [k, n_vocab]."""
        if self._logits_of is None:
            raise KeyError("the model has no output head, so the trace has no logits")
        cached = self._stacked.get("logits")
        if isinstance(rows, (int, np.integer)):
            i = int(rows) + (self.n_seq if rows < 0 else 0)
            if not 0 <= i < self.n_seq:
                raise IndexError(f"position {int(rows)} is outside the text's {self.n_seq} tokens")
            return cached[i] if cached is not None else self._logits_of(slice(i, i + 1))[0]
        return cached[rows] if cached is not None else self._logits_of(rows)

    def logits_change_at(self, other: "Trace", rows) -> np.ndarray:
        """[k, n_vocab]: other's logits minus this trace's at `rows` (a slice), by one product:
        the vocabulary product is linear in the head's input, so the change is the change of
        that input times the table. Both traces must come from the same model (an intervened
        trace and its clean one)."""
        if self._logits_of is None or other._logits_of is None:
            raise KeyError("the model has no output head, so the traces have no logits")
        if other.config is not self.config:
            raise ValueError("the traces were made by different models")
        if self.config.final_softcap:      # tanh-capped logits are not linear in the input
            return np.subtract(other._logits_of(rows), self._logits_of(rows))
        mine, theirs = self._logits_of.inputs, other._logits_of.inputs
        return self._logits_of.product(np.subtract(theirs[rows], mine[rows]))

    def layer_attention_mask(self, layer: int) -> Optional[np.ndarray]:
        """[n_seq, n_seq] additive mask layer `layer` used: a local layer's window (Gemma 2/3's
        local_layers), else attention_mask."""
        if self.attention_mask is None or not self.config.local_layers or not self.config.is_local(layer):
            return self.attention_mask
        from .layer_context import attention_mask   # (it does not import the trace)
        return attention_mask(self.config, self.n_seq, local=True)

    def layer_mask(self, layer: int) -> Optional[np.ndarray]:
        """[n_seq, n_seq] bool, True where layer `layer`'s attention is blocked, else None."""
        mask = self.layer_attention_mask(layer)
        return None if mask is None else ops.blocked_positions(mask)

    @property
    def mask(self) -> Optional[np.ndarray]:
        """[n_seq, n_seq] bool, True where attention is blocked (causal models), else None."""
        return None if self.attention_mask is None else ops.blocked_positions(self.attention_mask)

    def __getitem__(self, name: str) -> np.ndarray:
        """Whole-model arrays as they are; per-layer ones stacked to [n_layer, ...] (computing
        every layer's detail: a full pass's time and memory; then cached)."""
        if name in self.arrays:
            return self.arrays[name]
        if name == "hidden_states":
            return self.hidden_states
        if name == "logits" and self.has_logits:
            return self.logits
        cached = self._stacked.get(name)
        if cached is None:
            if name not in self.residual and name not in self.layer_names():
                raise KeyError(f"no array named {name!r}")
            first = self.layer(name, 0)
            cached = np.empty((self.config.n_layer, *first.shape), dtype=first.dtype)
            for i in range(self.config.n_layer):   # one layer at a time, within the budget
                cached[i] = self.layer(name, i)
            cached.flags.writeable = False
            self._stacked[name] = cached
        return cached

    def __contains__(self, name: str) -> bool:
        return (name in self.arrays or name in self.residual or name == "hidden_states"
                or (name == "logits" and self.has_logits) or name in self.layer_names())

    def names(self) -> list[str]:
        return sorted(set(self.arrays) | set(self.residual) | set(self.layer_names())
                      | {"hidden_states"} | ({"logits"} if self.has_logits else set()))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def nbytes(self) -> int:
        """Bytes held now: whole-model arrays, the residual stream, cached layer detail and
        stacked copies."""
        seen: dict[int, int] = {}
        for value in [*self.arrays.values(), *self._stacked.values(),
                      *(a for values in self.residual.values() for a in values)]:
            seen[id(value)] = value.nbytes
        return sum(seen.values()) + self.cache.nbytes()

    def to_dict(self) -> dict[str, np.ndarray]:
        """Everything, as named arrays with no Python objects (for .npz without pickle)."""
        out = {name: self[name] for name in self.names()}
        out.update({
            "input_ids": self.input_ids,
            "tokens": np.array(self.tokens, dtype=np.str_),
            "offsets": self.offsets,
            "special_tokens_mask": self.special_tokens_mask,
            "attentions": self.attentions,
            "text": np.array(self.text, dtype=np.str_),
        })
        if self.interventions:
            from .interventions import describe

            out["interventions"] = np.array([describe(i) for i in self.interventions], dtype=np.str_)
        if self.mask is not None:
            out["mask"] = self.mask
        return out
