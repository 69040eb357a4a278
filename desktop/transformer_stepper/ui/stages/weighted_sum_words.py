"""The weighted sum's answer (core/analysis/sum_readouts.py) as the numbers and words stage 8's
explanation quotes: formatting only."""
from __future__ import annotations

import numpy as np

from ...core.analysis.sum_readouts import WeightedSumAnswer


def answer_values(answer: WeightedSumAnswer, labels: list, weights: np.ndarray) -> dict:
    w = np.nan_to_num(np.asarray(weights, dtype=np.float64))
    name = lambda j: f"'{labels[int(j)]}'"
    values = {"n_keys": answer.n_keys, "limit_keys": answer.d_head + 1, "lost_from": answer.d_head + 2,
              "null_dimension": answer.null_dimension, "n_head_numbers": answer.d_head * len(answer.survival.tops),
              "recovery_error": f"{answer.recovery.max_error:.1e}",
              "distinct_tops": answer.survival.n_distinct_tops,
              "head_distance": f"{answer.survival.mean_head_distance:.2f}",
              "residual_cosine": f"{answer.survival.residual_cosine:.3f}",
              "attention_ratio": f"{answer.survival.attention_ratio:.2f}",
              "short_note": ""}
    if answer.short_recovery is not None:
        values["short_note"] = (f" In this text token {answer.short_position} ({name(answer.short_position)}) "
                                f"reads {answer.short_recovery.n_keys} keys: its weights come back from its output "
                                f"to within {answer.short_recovery.max_error:.1e}.")
    o = answer.other
    if o is not None:
        values.update(other_difference=f"{o.relative_difference:.1e}", other_change=f"{o.change:.2f}",
                      real_top=name(o.original_top), real_top_w=f"{w[o.original_top]:.3f}",
                      real_top_w2=f"{o.weights[o.original_top]:.3f}", new_top=name(o.top),
                      new_top_w=f"{w[o.top]:.3f}", new_top_w2=f"{o.weights[o.top]:.3f}",
                      target=name(o.target), target_w=f"{w[o.target]:.3f}",
                      target_w2=f"{o.weights[o.target]:.3f}")
    return values
