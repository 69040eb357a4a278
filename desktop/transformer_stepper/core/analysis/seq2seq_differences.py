"""The difference an intervention makes in an encoder–decoder, stage by stage in both stacks
(core/analysis/differences.py's measures, twice): the encoder's stages over the source, the decoder's
with Cross-attention over the target, teacher-forced on the same target so every position
lines up; and the translation each pass produces from the same source."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .differences import Differences, StageGrid, shown_arrays, stage_differences, stage_grid
from ..trace.seq2seq_generate import generate, translate
from ..model.seq2seq_stages import CROSS_ATTENTION, seq2seq_stages

SIDES = ("Encoder", "Decoder")


def seq2seq_differences(clean, intervened) -> dict[str, Differences]:
    """{"Encoder": ..., "Decoder": ...}: (array, layer) -> Difference in each stack; the
    decoder's include the cross-attention arrays."""
    decoder_names = shown_arrays() + tuple(n for n in CROSS_ATTENTION.computes if n not in shown_arrays())
    return {"Encoder": stage_differences(clean.encoder, intervened.encoder),
            "Decoder": stage_differences(clean.decoder, intervened.decoder, decoder_names)}


def intervene_and_compare(model, clean, interventions):
    """-> (the clean pass as compared, the intervened pass, seq2seq_differences of the two).
    A clean trace grown a step at a time (generation) is first retraced whole, as the
    intervened one is: the cached steps' float32 sums are ordered differently, and the map
    must show 0 wherever the intervention has not acted, not rounding."""
    if clean.decoder.computed_rows != clean.decoder.n_seq or clean.interventions:
        clean = model.intervene(clean, ())
    intervened = model.intervene(clean, interventions)
    return clean, intervened, seq2seq_differences(clean, intervened)


def seq2seq_grids(differences: dict[str, Differences], config, positions: Optional[dict] = None
                  ) -> dict[str, StageGrid]:
    """Each stack's stages × layers grid; `positions` {side: token or None}."""
    walk = seq2seq_stages(config)
    stacks = {"Encoder": config.encoder, "Decoder": config.decoder}
    return {side: stage_grid(differences[side], stacks[side], (positions or {}).get(side),
                             [s for section, s in walk if section == side])
            for side in SIDES}


@dataclass(frozen=True)
class Translations:
    """The same source translated greedily by the clean and the intervened model."""
    clean_ids: tuple[int, ...]
    intervened_ids: tuple[int, ...]
    clean_text: str
    intervened_text: str

    @property
    def first_difference(self) -> Optional[int]:
        """The first target position where the two translations differ (None: identical)."""
        for k, (a, b) in enumerate(zip(self.clean_ids, self.intervened_ids)):
            if a != b:
                return k
        return None if len(self.clean_ids) == len(self.intervened_ids) else min(len(self.clean_ids), len(self.intervened_ids))


def translations(model, source: str, interventions, n_tokens: int = 64,
                 clean: Optional[tuple[tuple[int, ...], str]] = None) -> Translations:
    """`clean`: (ids, text) of the clean translation when known (the same model, source and
    n_tokens): a change of interventions translates only the intervened pass again."""
    def text(trace) -> tuple[tuple[int, ...], str]:
        ids = tuple(int(i) for i in trace.decoder.input_ids[1:] if i != model.config.eos_token_id)
        return ids, "".join(model.target_tokenizer.continuation([], list(ids))).strip()

    clean_ids, clean_text = clean if clean is not None else text(translate(model, source, n_tokens))
    trace = model.trace(source, interventions=tuple(interventions))
    steps = generate(model, trace, n_tokens)
    new_ids, new_text = text(steps[-1] if steps else trace)
    return Translations(clean_ids, new_ids, clean_text, new_text)
