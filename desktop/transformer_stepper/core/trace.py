"""The Trace: every intermediate of one forward pass, as plain read-only arrays.

Names follow Hugging Face where it has one (input_ids, hidden_states, attentions, logits).
Per-layer arrays are kept one per layer (`trace.layer(name, i)`) and `trace[name]` stacks
them with a leading n_layer axis; see README "Trace arrays"."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

import numpy as np

from .config import ModelConfig

# Per-layer names in the order the forward pass produces them (pre-LN order for ln_*).
LAYER_NAMES = (
    "layer_in", "ln_1_in", "ln_1_normalized", "ln_1_out", "attn_in", "q", "k", "v",
    "scores_raw", "scores", "attn_weights", "head_outputs", "heads_concat", "attn_out",
    "attn_residual", "ln_2_in", "ln_2_normalized", "ln_2_out", "mlp_in", "mlp_pre_act",
    "mlp_act", "mlp_out", "mlp_residual", "layer_out",
)


class Recorder:
    """Collects what forward() records, by reference: the forward pass allocates a fresh
    array for every intermediate, so keeping it costs nothing, where copying every layer
    into a stacked buffer would double the memory traffic of a trace."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.per_layer: dict[str, list[np.ndarray]] = {}

    def __call__(self, name: str, value: np.ndarray, layer: Optional[int] = None) -> None:
        if layer is None:
            self.arrays[name] = value
        else:
            self.per_layer.setdefault(name, []).append(value)

    def finish(self) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, ...]]]:
        """-> (whole-model arrays, per-layer arrays), all frozen read-only."""
        for value in [*self.arrays.values(), *(v for vs in self.per_layer.values() for v in vs)]:
            value.flags.writeable = False
        return dict(self.arrays), {name: tuple(values) for name, values in self.per_layer.items()}


@dataclass(frozen=True)
class Trace:
    config: ModelConfig
    text: str
    tokens: tuple[str, ...]                 # the tokenizer's pieces, special tokens included
    input_ids: np.ndarray                   # [n_seq] int64
    offsets: np.ndarray                     # [n_seq, 2] character span in `text`; (0, 0) for specials
    special_tokens_mask: np.ndarray         # [n_seq] bool
    arrays: dict = field(repr=False)        # name -> read-only array (whole-model ones)
    layer_arrays: dict = field(repr=False, default_factory=dict)  # name -> one array per layer
    truncated: bool = False                 # the text was longer than the model's context
    _stacked: dict = field(repr=False, default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for value in (self.input_ids, self.offsets, self.special_tokens_mask):
            value.flags.writeable = False

    def layer(self, name: str, layer: int) -> np.ndarray:
        """One layer's array (e.g. layer("attn_weights", 2) -> [n_head, n_seq, n_seq]),
        without stacking the others: what a view of one layer should ask for."""
        if name in self.layer_arrays:
            return self.layer_arrays[name][layer]
        return self[name][layer]

    # -- Hugging Face's conventions -------------------------------------------------------
    @property
    def n_seq(self) -> int:
        return len(self.input_ids)

    @property
    def hidden_states(self) -> np.ndarray:
        """[n_layer + 1, n_seq, d_model]: embedding output, then every layer's output, the last
        with ln_f applied where the model has it (as output_hidden_states does)."""
        cached = self._stacked.get("hidden_states")
        if cached is None:
            layers = list(self.layer_arrays["layer_out"])
            if self.config.final_norm:
                layers[-1] = self.arrays["final_ln_out"]
            cached = np.stack([self.arrays["embedding_output"], *layers])
            cached.flags.writeable = False
            self._stacked["hidden_states"] = cached
        return cached

    @property
    def attentions(self) -> np.ndarray:
        """[n_layer, n_head, n_seq, n_seq] attention weights (softmax output)."""
        return self["attn_weights"]

    @property
    def logits(self) -> Optional[np.ndarray]:
        return self.arrays.get("logits")

    @property
    def mask(self) -> Optional[np.ndarray]:
        """[n_seq, n_seq] bool, True where attention is blocked (causal models), else None."""
        if not self.config.causal:
            return None
        return np.triu(np.ones((self.n_seq, self.n_seq), dtype=bool), k=1)

    def __getitem__(self, name: str) -> np.ndarray:
        """Whole-model arrays as they are; per-layer ones stacked to [n_layer, ...] on first
        access (then cached)."""
        if name in self.arrays:
            return self.arrays[name]
        if name == "hidden_states":
            return self.hidden_states
        cached = self._stacked.get(name)
        if cached is None:
            cached = np.stack(self.layer_arrays[name])  # KeyError names the missing array
            cached.flags.writeable = False
            self._stacked[name] = cached
        return cached

    def __contains__(self, name: str) -> bool:
        return name in self.arrays or name in self.layer_arrays or name == "hidden_states"

    def names(self) -> list[str]:
        return sorted(set(self.arrays) | set(self.layer_arrays) | {"hidden_states"})

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def nbytes(self) -> int:
        """Bytes of every recorded intermediate (stacked copies made on access not counted)."""
        return (sum(a.nbytes for a in self.arrays.values())
                + sum(a.nbytes for values in self.layer_arrays.values() for a in values))

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
        if self.mask is not None:
            out["mask"] = self.mask
        return out
