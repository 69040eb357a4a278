"""The Trace: every intermediate of one forward pass, as plain read-only arrays.

Names follow Hugging Face where it has one (input_ids, hidden_states, attentions, logits).
Per-layer arrays are stacked with a leading n_layer axis; see README "Trace arrays"."""
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
    """Collects what forward() records; `finish()` freezes everything.

    Per-layer arrays are copied into one preallocated [n_layer, ...] buffer as they arrive,
    so a layer's temporaries are freed as soon as the layer is done (a list + np.stack at the
    end would hold every layer's arrays and the stacked copy at once)."""

    def __init__(self, n_layer: int) -> None:
        self.n_layer = n_layer
        self.arrays: dict[str, np.ndarray] = {}

    def __call__(self, name: str, value: np.ndarray, layer: Optional[int] = None) -> None:
        if layer is None:
            self.arrays[name] = value
            return
        stacked = self.arrays.get(name)
        if stacked is None:
            stacked = self.arrays[name] = np.empty((self.n_layer, *value.shape), dtype=value.dtype)
        stacked[layer] = value

    def finish(self) -> dict[str, np.ndarray]:
        for value in self.arrays.values():
            value.flags.writeable = False
        return dict(self.arrays)


@dataclass(frozen=True)
class Trace:
    config: ModelConfig
    text: str
    tokens: tuple[str, ...]                 # the tokenizer's pieces, special tokens included
    input_ids: np.ndarray                   # [n_seq] int64
    offsets: np.ndarray                     # [n_seq, 2] character span in `text`; (0, 0) for specials
    special_tokens_mask: np.ndarray         # [n_seq] bool
    arrays: dict = field(repr=False)        # name -> read-only array
    truncated: bool = False                 # the text was longer than the model's context

    def __post_init__(self) -> None:
        for value in (self.input_ids, self.offsets, self.special_tokens_mask):
            value.flags.writeable = False

    # -- Hugging Face's conventions -------------------------------------------------------
    @property
    def n_seq(self) -> int:
        return len(self.input_ids)

    @property
    def hidden_states(self) -> np.ndarray:
        """[n_layer + 1, n_seq, d_model]: embedding output, then every layer's output, the last
        with ln_f applied where the model has it (as output_hidden_states does)."""
        cached = self.arrays.get("hidden_states")
        if cached is None:
            layers = list(self.arrays["layer_out"])
            if self.config.final_norm:
                layers[-1] = self.arrays["final_ln_out"]
            cached = np.stack([self.arrays["embedding_output"], *layers])
            cached.flags.writeable = False
            self.arrays["hidden_states"] = cached
        return cached

    @property
    def attentions(self) -> np.ndarray:
        """[n_layer, n_head, n_seq, n_seq] attention weights (softmax output)."""
        return self.arrays["attn_weights"]

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
        if name == "hidden_states":
            return self.hidden_states
        return self.arrays[name]

    def __contains__(self, name: str) -> bool:
        return name in self.arrays or name == "hidden_states"

    def names(self) -> list[str]:
        return sorted(set(self.arrays) | {"hidden_states"})

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def nbytes(self) -> int:
        return sum(a.nbytes for name, a in self.arrays.items() if name != "hidden_states")

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
