"""The numbers the Compare explanation quotes (resources/explanations/compare.md): the row is
the same, what enters layer 0, from which layer on the vectors separate, what each one read."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ...core.model import measures
from ...core.analysis.compare import PARTING_MARGIN, Comparison, piece_text
from ..explain import explanations
from ..explain.wording import times

TEMPLATE = "compare"


def _cos(value: float) -> str:
    return f"{value:.3f}"


def _span(values: np.ndarray) -> str:
    low, high = float(np.min(values)), float(np.max(values))
    return _cos(low) if abs(high - low) < 5e-4 else f"{_cos(low)} to {_cos(high)}"


def _after(comparison: Comparison, state: int) -> str:
    # a hidden-state index in words: 0 is the embedding output, i the output of layer i - 1
    return "the embedding" if state == 0 else f"layer {state - 1}"


def _in_sentences(occurrences) -> str:
    """'4 sentences', 'one sentence', 'one sentence, twice'."""
    n = len({o.sentence for o in occurrences})
    where = "one sentence" if n == 1 else f"{n} sentences"
    return where if n == len(occurrences) else f"{where}, {times(len(occurrences))}"


MAX_TABLE_PAIRS = 10


def pair_table(comparison: Comparison) -> str:
    """Up to MAX_TABLE_PAIRS pairs, those that end furthest apart first."""
    rows = ["| pair | embedding | last layer | separate from |", "|---|---|---|---|"]
    order = np.argsort(comparison.pair_cosines[:, -1], kind="stable")
    for p in order[:MAX_TABLE_PAIRS]:
        cosines = comparison.pair_cosines[p]
        parting = measures.parting_index(cosines, PARTING_MARGIN)
        rows.append(f"| {comparison.pair_label(p)} | {_cos(cosines[0])} | {_cos(cosines[-1])} | "
                    f"{'never' if parting is None else _after(comparison, parting)} |")
    more = len(comparison.pairs) - MAX_TABLE_PAIRS
    if more > 0:
        rows.append(f"\n…and {more} more pairs (hover the cosine plot).")
    return "\n".join(rows)


def values_and_flags(comparison: Optional[Comparison], attention: Optional[Sequence[np.ndarray]],
                     layer: int, head: int, labels: Sequence[Sequence[str]]) -> tuple[dict, dict]:
    flags: dict = {"result": comparison is not None and len(comparison.occurrences) > 0}
    values: dict = {"layer": layer, "head": head}
    if not flags["result"]:
        return values, flags
    c = comparison
    occurrences = c.occurrences
    first = occurrences[0]
    trace = c.sentences[first.sentence].trace
    config = trace.config
    ids = sorted({o.token_id for o in occurrences})
    n_pairs = len(c.pairs)
    flags.update(pairs=n_pairs > 0, same_id=len(ids) == 1, rotary=config.position == "rotary",
                 added=config.position in ("learned", "sinusoidal"), no_position=config.position == "none",
                 token_types=config.n_token_types > 0, embed_norm=config.embed_norm,
                 causal=config.causal,
                 same_position=len({o.position for o in occurrences}) == 1,
                 problems=bool(c.problems), notes=bool(c.notes))
    max_lookup = max((float(np.abs(c.lookup_difference(i, 0)).max()) for i in range(1, len(occurrences))),
                     default=0.0)
    values.update(word=c.word or piece_text(first.piece), n_occ=len(occurrences),
                  n_sentences=len(c.sentences), token_id=first.token_id, piece=first.piece,
                  d_model=config.d_model, n_layer=config.n_layer, model=config.name or config.family,
                  pieces=", ".join(f"S{o.number} '{o.piece}' (id {o.token_id})" for o in occurrences),
                  max_lookup=f"{max_lookup:.6g}",
                  positions=", ".join(f"S{o.number}: {o.position}" for o in occurrences),
                  problems="; ".join(c.problems), notes="; ".join(c.notes),
                  in_sentences=_in_sentences(occurrences))
    if n_pairs:
        first_cos, last_cos = c.pair_cosines[:, 0], c.pair_cosines[:, -1]
        apart = int(np.argmin(last_cos))            # the pair that ends furthest apart
        cosines = c.pair_cosines[apart]
        parting = measures.parting_index(cosines, PARTING_MARGIN)
        drop_state, drop = measures.largest_drop(cosines)
        flags.update(parted=parting is not None)
        values.update(cos_x0=_span(first_cos), cos_last=_span(last_cos), pair_table=pair_table(c),
                      pair=c.pair_label(apart), pair_first=_cos(cosines[0]), pair_last=_cos(cosines[-1]),
                      margin=f"{PARTING_MARGIN:g}",
                      curve=" → ".join(_cos(v) for v in cosines),
                      drop_layer=_after(c, drop_state), drop_from=_cos(cosines[drop_state - 1]),
                      drop_to=_cos(cosines[drop_state]))
        if parting is not None:
            values.update(parting_layer=_after(c, parting), parting_cos=_cos(cosines[parting]))
    values.update(self_last=", ".join(f"S{o.number} {_cos(c.self_cosines[i, -1])}"
                                      for i, o in enumerate(occurrences)))
    if attention:
        read = []
        for o, (occ, rows) in enumerate(zip(occurrences, attention)):
            weights = rows[head]
            j = int(np.argmax(weights))
            read.append(f"S{occ.number} '{labels[occ.sentence][j]}' ({weights[j]:.2f})")
        values.update(read="; ".join(read))
        flags.update(attention=True)
    nearest = []
    for o, occ in enumerate(occurrences):
        i = int(c.nearest[o, -1, 0])
        if i >= 0:
            nearest.append(f"S{occ.number} '{piece_text(c.pool_pieces[i])}' "
                           f"({c.nearest_cosines[o, -1, 0]:.2f})")
    values.update(nearest_last=", ".join(nearest))
    flags.update(nearest=bool(nearest))
    return values, flags


def render(comparison: Optional[Comparison], attention: Optional[Sequence[np.ndarray]], layer: int,
           head: int, labels: Sequence[Sequence[str]]) -> str:
    values, flags = values_and_flags(comparison, attention, layer, head, labels)
    return explanations.render(explanations.template(TEMPLATE), values, flags)
