"""The Trace: every intermediate of one forward pass, as plain read-only arrays, computed lazily.

The forward pass keeps the residual stream (each layer's input and output) and the whole-model
arrays (embeddings, final norm, logits). A layer's *detail* (q, k, v, scores, weights, head
outputs, norms, feed-forward arrays) is computed the first time it is asked for, by the same
block function from that layer's stored input (in a causal trace made by several passes, block
by block as they computed the rows: core/trace/row_blocks.py), so it is bit-identical to recording it
during the pass; detailed layers are kept in a cache bounded by a byte budget and recomputed when
evicted. Memory therefore does not grow with n_layer · n_head · n_seq². A layer keeps one
n_head · n_seq² array (the weights; none when kept per head), q, k, v as projected, and derives
the scores when read (core/trace/layer_detail.py); `trace.head_array(name, i, h)` reads one head.

Names follow Hugging Face where it has one (input_ids, hidden_states, attentions, logits).
`trace.layer(name, i)` is one layer's array; `trace[name]` stacks every layer (a full pass's
worth of detail and memory); see docs/cli.md "Trace arrays"."""
from __future__ import annotations

import threading
from typing import Callable, Iterator, Optional

import numpy as np

from ..model import ops
from ..model.config import ModelConfig
from .layer_cache import LayerCache
from .layer_detail import LayerDetail

# Per-layer names of the residual stream: kept by the pass itself, never recomputed.
RESIDUAL_NAMES = ("layer_in", "layer_out")
# ... and what an MoE model's pass keeps of every layer besides (core/model/moe.py): the router's
# logits [n_seq, n_expert] and choices [n_seq, k] a layer, so the experts' load and a token's
# path read every layer without computing its detail
ROUTER_KEPT = ("router_logits", "expert_ids", "expert_gates")
PASS_KEPT = RESIDUAL_NAMES + ROUTER_KEPT
DEFAULT_DETAIL_BUDGET = 1 << 30      # bytes of layer detail a trace keeps (1 GiB)


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
                 logits_of=None, row_blocks: Optional[tuple[tuple[int, int], ...]] = None,
                 score_terms: Optional[dict] = None) -> None:
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
        self.kv_cache = kv_cache             # decoders: every layer's keys and values (core/model/kv_cache.py)
        self.interventions = interventions   # what changed this pass (core/model/interventions.py)
        # [n_seq] bool: appended by generation (Model.extend), not typed
        self.generated = np.zeros(len(input_ids), bool) if generated is None else generated
        # how many positions the pass that made this trace computed (the rest came from the cache)
        self.computed_rows = len(input_ids) if computed_rows is None else computed_rows
        # causal traces: the (start, extent) row blocks its passes computed together, which its
        # layers' detail is computed by (core/trace/row_blocks.py); None: one pass over every row
        self.row_blocks = row_blocks
        # prefix ("", "cross_") -> core.model.score_terms.ScoreTerms where the scores are not the
        # config's (T5: not scaled, plus a position bias); None: the config's
        self.score_terms = score_terms
        self.cache = LayerCache(compute_layer, detail_budget)
        # the output head (core.trace.model.LogitHead): rows -> their logits [k, n_vocab], and its
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

    def passing_detail(self, layer: int) -> LayerDetail:
        """A layer's detail for a pass over every layer (core/analysis/model_diff.py): the held one, or
        computed and not kept, so the layers a view holds stay held."""
        if not 0 <= layer < self.config.n_layer:
            raise IndexError(f"layer {layer} is out of range (the model has {self.config.n_layer})")
        return self.cache.read(layer)

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
        array is derived (scores) or the layer is kept per head (core/trace/layer_detail.py)."""
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

    def head_rows_ready(self, name: str, layer: int, row: int) -> bool:
        """Whether head_rows(name, layer, row) costs nothing now (the layer is held and the
        rows are kept, or were read last): a view computes them in a worker otherwise."""
        if not self.cache.has(layer):
            return False
        return self.detail(layer).rows_ready(name, row)

    def layer_names(self) -> tuple[str, ...]:
        """Per-layer names in the order the forward pass produces them (a mixture-of-experts
        model with dense layers: those of its first dense and first routed layer)."""
        if self._layer_names is None:
            names = dict.fromkeys(self.detail(0))
            for layer in self._differing_layers():
                names.update(dict.fromkeys(self.detail(layer)))
            self._layer_names = tuple(names)
        return self._layer_names

    def _differing_layers(self) -> list[int]:
        # the first routed and the first dense layer of an MoE model that has both
        config = self.config
        if not config.is_moe or not config.dense_layers:
            return []
        routed = [i for i in range(config.n_layer) if config.is_moe_layer(i)]
        return [routed[0], config.dense_layers[0]] if routed else []

    def uniform(self, name: str) -> bool:
        """Whether every layer has `name` with one shape (so trace[name] stacks them): not the
        router's and experts' arrays, nor the dense feed-forward's, of an MoE model with dense
        layers."""
        if not self._differing_layers():
            return True
        routed, dense = (self.detail(i) for i in self._differing_layers())
        return name in routed and name in dense and routed[name].shape == dense[name].shape

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
    def logit_head(self):
        """The output head the logits come from (core.trace.model.LogitHead; an encoder–decoder's
        Seq2SeqLogitHead adds its scaling and bias), or None."""
        return self._logits_of

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
        from ..model.layer_context import attention_mask   # (it does not import the trace)
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
            if not self.uniform(name):
                raise KeyError(f"{name!r} differs between this mixture-of-experts model's routed and dense "
                               f"layers: read trace.layer({name!r}, i) a layer at a time")
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
        out = {}
        for name in self.names():
            if self.uniform(name):
                out[name] = self[name]
                continue
            for layer in range(self.config.n_layer):    # a routed or a dense layer's own array
                value = self.layer(name, layer) if name in self.detail(layer) or name in self.residual else None
                if value is not None and value.size:
                    out[f"{name}_layer{layer}"] = value
        out.update({
            "input_ids": self.input_ids,
            "tokens": np.array(self.tokens, dtype=np.str_),
            "offsets": self.offsets,
            "special_tokens_mask": self.special_tokens_mask,
            "attentions": self.attentions,
            "text": np.array(self.text, dtype=np.str_),
        })
        if self.interventions:
            from ..model.interventions import describe

            out["interventions"] = np.array([describe(i) for i in self.interventions], dtype=np.str_)
        if self.mask is not None:
            out["mask"] = self.mask
        return out
