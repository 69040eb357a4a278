"""What an attention's scores are made of, as the pass computed them: q·k times a scale, plus an
additive bias where the model has one (T5's relative position bias), then the mask. Most
models scale by 1/√d_head (Gemma 2/3: query_pre_attn_scalar^-1/2) and add no bias; T5 does not
scale and adds its bias to every layer's scores. A stack's Trace carries its own ScoreTerms
when they differ from its config's (core/trace/seq2seq_model.py sets them for T5); the Scores view's
title and notes and the score's provenance read them here, so what they say is what was done."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .forward import attention_scale


@dataclass(frozen=True)
class ScoreTerms:
    scale: float                      # what q·k is multiplied by
    scale_label: str                  # how the scale is written: "1/√8", "not scaled"
    bias_name: str = ""               # the trace's whole-model array [n_head, n_q, n_k] added, or ""
    bias_label: str = ""              # what the bias is: "T5 relative position bias"

    def formula(self, softcap: float = 0.0) -> str:
        """The scores as computed, in one line: 'q·kᵀ/√8', 'q·kᵀ (not scaled) + position bias'."""
        if self.scale_label.startswith("1/"):
            product = f"q·kᵀ/{self.scale_label[2:]}"
        elif self.scale == 1.0:
            product = "q·kᵀ (not scaled)"
        else:
            product = f"q·kᵀ·{self.scale_label}"
        if softcap:
            product = f"{softcap:g}·tanh({product} / {softcap:g})"
        return product + (f" + {self.bias_label}" if self.bias_name else "")


def config_terms(config) -> ScoreTerms:
    """A one-stack model's scores: scaled by attention_scale(config), no bias."""
    scale = float(attention_scale(config))
    label = (f"{config.query_scale:g}^-1/2" if config.query_scale else
             f"({config.attn_mscale:.4g}²/√{config.d_head})" if config.attn_mscale != 1.0 else
             f"1/√{config.d_head}")                # mscale²: DeepSeek-V2's YaRN correction
    return ScoreTerms(scale, label)


def unscaled(bias_name: str = "", bias_label: str = "") -> ScoreTerms:
    """Scores not scaled (T5 folds 1/√d_head into its initialisation), with a bias or not."""
    return ScoreTerms(1.0, "not scaled", bias_name, bias_label)


def score_terms(trace, prefix: str = "") -> ScoreTerms:
    """The terms of `trace`'s scores ("" self-attention, "cross_" cross-attention)."""
    own = getattr(trace, "score_terms", None) or {}
    return own.get(prefix) or config_terms(trace.config)


def score_bias(trace, prefix: str, head: int) -> Optional[np.ndarray]:
    """[n_q, n_k] the bias added to one head's scores, or None."""
    terms = score_terms(trace, prefix)
    return trace.arrays[terms.bias_name][head] if terms.bias_name else None
