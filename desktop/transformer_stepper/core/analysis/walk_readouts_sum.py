"""The weighted-sum question's readouts (walk 5): what a head passes on, another weighting with
the same output, the weights read back from a short row, and what survives, from
core/analysis/sum_readouts.py for the step's layer, head and selected token."""
from __future__ import annotations

import numpy as np

from .sum_readouts import WeightedSumAnswer, weighted_sum_answer
from .walk_context import Context, _f, _register


def answer(c: Context) -> WeightedSumAnswer:
    """Computed once per step (the readouts below share it)."""
    cached = getattr(c, "_sum_answer", None)
    if cached is None:
        cached = c._sum_answer = weighted_sum_answer(c.trace, c.state.layer, c.state.head, c.position)
    return cached


@_register
def read_passed_on(c: Context) -> dict:
    """The d_head numbers passed on against the n weights they summarise; whether the weights
    can be read back from them (least squares), and from how many keys on they cannot."""
    a = answer(c)
    numbers = dict(n_keys=a.n_keys, passed_numbers=a.d_head, limit_keys=a.d_head + 1,
                   lost_from=a.d_head + 2, null_dimension=a.null_dimension,
                   n_head_numbers=c.config.n_head * a.d_head)
    if a.recovery.recoverable:
        numbers["recovery"] = (f"Here '{c.label(a.position)}' reads {a.n_keys} keys, no more than "
                               f"{a.d_head + 1}, and its values are independent: its weights can be read back "
                               f"from the {a.d_head} numbers alone (least squares; largest error "
                               f"{a.recovery.max_error:.1e}). Nothing is lost yet.")
    else:
        numbers["recovery"] = (f"Here '{c.label(a.position)}' reads {a.n_keys} keys, more than {a.d_head + 1}: "
                               f"other weightings give the same output ({a.null_dimension} free directions), "
                               f"so the weights cannot be read back (least squares misses by up to "
                               f"{a.recovery.max_error:.2f}).")
        if a.short_recovery is not None:
            numbers["recovery"] += (f" Token {a.short_position} ('{c.label(a.short_position)}') reads "
                                    f"{a.short_recovery.n_keys}: its weights come back to within "
                                    f"{a.short_recovery.max_error:.1e}.")
    return numbers


@_register
def read_other_weighting(c: Context) -> dict:
    """Another valid weighting w′ with the same output, in words and numbers."""
    a = answer(c)
    w = np.nan_to_num(c.trace.head_array("attn_weights", c.state.layer, c.state.head)[a.position])
    o = a.other
    if o is None:
        return dict(other_verdict=(f"With {a.n_keys} keys and independent values no other weighting gives this "
                                   f"output: the weights are determined by it."),
                    other_difference=0.0, other_change=0.0, other_keys=a.n_keys)
    real, new = c.label(o.original_top), c.label(o.top)
    if o.top_changed:
        verdict = (f"w puts {w[o.original_top]:.3f} on '{real}' (its top) and {w[o.top]:.3f} on '{new}'; "
                   f"w′ puts {o.weights[o.original_top]:.3f} on '{real}' and {o.weights[o.top]:.3f} on '{new}', "
                   f"now its top")
    else:
        verdict = (f"every weighting with this output keeps '{real}' on top (w {w[o.original_top]:.3f}, "
                   f"w′ {o.weights[o.original_top]:.3f}); w′ moves weight among the others, e.g. "
                   f"'{c.label(o.target)}' {w[o.target]:.3f} → {o.weights[o.target]:.3f}")
    return dict(other_verdict=verdict, other_difference=o.relative_difference, other_change=o.change,
                other_keys=a.n_keys)


@_register
def read_survives(c: Context) -> dict:
    """What survives the sum: the heads' different summaries, the residual stream's own copy."""
    a = answer(c)
    s = a.survival
    return dict(distinct_tops=s.n_distinct_tops, head_distance=s.mean_head_distance,
                residual_cosine=s.residual_cosine, attention_ratio=s.attention_ratio,
                tops_by_head=", ".join(f"head {h} → '{c.label(int(t))}'" for h, t in enumerate(s.tops[:8])))
