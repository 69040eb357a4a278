"""The app's trace against another implementation's arrays of the same ids (Hugging Face
transformers, llama.cpp): per layer the largest |app − reference| of the hidden state (HF's
hidden_states convention) and of the attention weights, at the output the largest logit gap
and the top-1 agreement, and the verdict against a tolerance (1e-4: the project's bar)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

TOLERANCE = 1e-4


@dataclass(frozen=True)
class LayerCheck:
    index: int                        # 0: the embedding output; i: block i - 1's output
    hidden_max_abs: float
    attention_max_abs: Optional[float]   # None: the reference gave no attention weights


@dataclass(frozen=True)
class CheckResult:
    layers: tuple[LayerCheck, ...]
    logits_max_abs: Optional[float]
    top1_agree: Optional[float]       # fraction of positions whose argmaxes agree
    tolerance: float = TOLERANCE

    @property
    def largest(self) -> float:
        values = [layer.hidden_max_abs for layer in self.layers]
        values += [layer.attention_max_abs for layer in self.layers if layer.attention_max_abs is not None]
        if self.logits_max_abs is not None:
            values.append(self.logits_max_abs)
        return max(values)

    @property
    def passed(self) -> bool:
        # NaN anywhere fails (max of NaN is NaN, and NaN <= x is False)
        return bool(self.largest <= self.tolerance) and self.top1_agree in (None, 1.0)

    def lines(self, reference: str = "Hugging Face") -> list[str]:
        """The report, a line per row (the CLI prints it, the app shows it)."""
        rows = [f"{'':14}{'max |app - ' + reference + '|':>30}{'attention weights':>20}"]
        for layer in self.layers:
            name = "embedding" if layer.index == 0 else f"layer {layer.index - 1}"
            attention = "" if layer.attention_max_abs is None else f"{layer.attention_max_abs:.3g}"
            rows.append(f"{name:14}{layer.hidden_max_abs:30.3g}{attention:>20}")
        if self.logits_max_abs is not None:
            rows.append(f"{'logits':14}{self.logits_max_abs:30.3g}")
            rows.append(f"top-1 agreement: {100 * self.top1_agree:.1f} % of positions")
        verdict = "PASS" if self.passed else "FAIL"
        rows.append(f"{verdict}: the largest difference is {self.largest:.3g} "
                    f"({'within' if self.largest <= self.tolerance else 'over'} {self.tolerance:g})")
        return rows


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    # masked entries (-inf or NaN in both) count as equal
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    both_masked = (~np.isfinite(a)) & (~np.isfinite(b)) & ((a == b) | (np.isnan(a) & np.isnan(b)))
    gap = np.abs(np.where(both_masked, 0.0, a - b))
    return float(np.max(gap)) if gap.size else 0.0


def check_trace(trace, hidden_states: np.ndarray, logits: Optional[np.ndarray] = None,
                attentions: Optional[np.ndarray] = None, tolerance: float = TOLERANCE) -> CheckResult:
    """`trace` against a reference's hidden_states [n_layer + 1, n_seq, d_model] (and its
    logits [n_seq, n_vocab], attentions [n_layer, n_head, n_seq, n_seq]) of the same ids."""
    ours = trace.hidden_states
    if hidden_states.shape != ours.shape:
        raise ValueError(f"the reference's hidden states are {list(hidden_states.shape)}, the app's {list(ours.shape)}")
    layers = []
    for i in range(len(ours)):
        attention = None
        if attentions is not None and i > 0:
            attention = _max_abs(trace.layer("attn_weights", i - 1), attentions[i - 1])
        layers.append(LayerCheck(i, _max_abs(ours[i], hidden_states[i]), attention))
    logits_gap = top1 = None
    if logits is not None and trace.has_logits:
        app_logits = trace.logits
        logits_gap = _max_abs(app_logits, logits)
        top1 = float(np.mean(app_logits.argmax(axis=1) == np.asarray(logits).argmax(axis=1)))
    return CheckResult(tuple(layers), logits_gap, top1, tolerance)


@dataclass(frozen=True)
class LogitsAgreement:
    """The app's logits against an implementation that rounds inside its products (llama.cpp
    quantizes activations to 8 bits in its quantized matrix products): not a 1e-4 comparison,
    but how often the argmax agrees and how the logits correlate."""
    top1_agree: float
    correlation: float          # Pearson's r over every (position, token), float64
    max_abs: float


def logits_agreement(app_logits: np.ndarray, other: np.ndarray) -> LogitsAgreement:
    a, b = np.asarray(app_logits, np.float64), np.asarray(other, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"logits are {list(b.shape)}, the app's {list(a.shape)}")
    r = float(np.corrcoef(a.ravel(), b.ravel())[0, 1])
    return LogitsAgreement(float(np.mean(a.argmax(1) == b.argmax(1))), r, float(np.abs(a - b).max()))
