"""Compare on the encoder side of an encoder–decoder: the same source word in several
sentences through the encoder (identical lookup rows, per-layer cosines, the map, nearest
words), as core/analysis/compare.py does for encoders. EncoderSide is the encoder as a one-stack Model
whose trace(text) is the encoder's own pass (T5's unscaled scores and position bias included),
so every Compare reading applies unchanged.

    from transformer_stepper.core.analysis.seq2seq_compare import compare_source
    result = compare_source(load_model("opus-mt-en-de"), ["The bank of the river .",
                                                          "She went to the bank ."], "bank")
"""
from __future__ import annotations

from typing import Optional, Sequence

from .compare import NEAREST_K, Comparison, compare
from ..trace.model import Model
from ..model.seq2seq import Scoped
from ..trace.trace import DEFAULT_DETAIL_BUDGET, Trace


class EncoderSide(Model):
    """The encoder of `seq2seq` (a Seq2SeqModel) as a Model: the source tokenizer, the encoder's
    config and weights, and its trace."""

    def __init__(self, seq2seq) -> None:
        super().__init__(seq2seq.config.encoder, Scoped(seq2seq.params, "encoder."), seq2seq.tokenizer,
                         seq2seq.source)
        self.seq2seq = seq2seq

    @property
    def name(self) -> str:
        return f"{self.seq2seq.name} (encoder)"

    def trace(self, text: str, detail_budget: int = DEFAULT_DETAIL_BUDGET,
              detail_layers: tuple[int, ...] = (), interventions: Sequence = (),
              after_layer=None) -> Trace:
        """The encoder's pass over `text` as the translation window runs it (no decoder)."""
        return self.seq2seq.encoder_trace(text, detail_budget, tuple(interventions))


def compare_source(model, texts: Sequence[str], word: str = "",
                   positions: Optional[Sequence[Optional[int]]] = None, k: int = NEAREST_K) -> Comparison:
    """compare() over the encoder of the encoder–decoder `model`."""
    return compare(EncoderSide(model), texts, word, positions, k)
