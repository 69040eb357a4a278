"""Interventions in an encoder–decoder: a head of one of its three attentions ablated (the
encoder's self-attention, the decoder's, or the decoder's cross-attention), or the source read
without positions. Each acts inside the one pass, as core/model/interventions.py's do for one stack:
the three attention contexts carry their stack's edits (core/model/seq2seq.py), so a lazily computed
layer and every generation step get them too.

    from transformer_stepper.core.model.seq2seq_interventions import InStack, NoSourcePositions
    ablated = model.trace(source, target, interventions=[InStack("cross", AblateHead(1, 2))])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from .errors import ModelError
from .interventions import AblateHead, HeadTemperature, NoPositions, check, describe

STACKS = ("encoder", "decoder", "cross")
STACK_NAMES = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
               "cross": "cross-attention"}


@dataclass(frozen=True)
class InStack:
    """A head intervention (AblateHead, HeadTemperature) in one attention: "encoder" (its
    self-attention), "decoder" (its causal self-attention) or "cross" (the decoder's
    cross-attention, whose head outputs are zeroed before its output projection)."""
    stack: Literal["encoder", "decoder", "cross"]
    edit: AblateHead | HeadTemperature


@dataclass(frozen=True)
class NoSourcePositions:
    """The encoder reads the source without position information: no position vectors added
    (BART, Marian), or no relative position bias in its scores (T5)."""


Seq2SeqIntervention = InStack | NoSourcePositions


def describe_one(item: Seq2SeqIntervention) -> str:
    if isinstance(item, NoSourcePositions):
        return "no source positions"
    return f"{STACK_NAMES[item.stack]}: {describe(item.edit)}"


def describe_all(items: Sequence[Seq2SeqIntervention]) -> str:
    return " · ".join(f"[{describe_one(i)}]" for i in items)


def split(items: Sequence[Seq2SeqIntervention], config) -> dict[str, tuple]:
    """-> {"encoder", "decoder", "cross"}: the plain interventions each attention context
    carries, checked against its stack (one ModelError line naming the first bad one)."""
    out: dict[str, list] = {stack: [] for stack in STACKS}
    for item in items:
        if isinstance(item, NoSourcePositions):
            out["encoder"].append(NoPositions())
            continue
        if not isinstance(item, InStack) or item.stack not in STACKS:
            raise ModelError(f"unknown encoder–decoder intervention {item!r} (InStack or NoSourcePositions)")
        if not isinstance(item.edit, (AblateHead, HeadTemperature)):
            raise ModelError(f"{describe_one(item)}: only heads are ablated or tempered in one stack")
        if item.stack != "encoder" and isinstance(item.edit, AblateHead) and item.edit.mode == "mean":
            # each decoding step computes only its new position: a mean over positions would
            # change meaning as the target grows
            raise ModelError(f"{describe_one(item)}: the decoder's heads are ablated with zeros "
                             f"(mode 'zero'); a mean over the target so far changes at every step")
        out[item.stack].append(item.edit)
    stack_config = {"encoder": config.encoder, "decoder": config.decoder, "cross": config.decoder}
    return {stack: check(edits, stack_config[stack], 0) for stack, edits in out.items()}


def parse(text: str) -> InStack:
    """'cross:1:2' (stack:layer:head) -> InStack(stack, AblateHead(layer, head)), for the CLI."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in STACKS or not all(p.isdigit() for p in parts[1:]):
        raise ModelError(f"--ablate {text!r}: expected STACK:LAYER:HEAD with STACK one of "
                         f"{', '.join(STACKS)} (e.g. cross:1:2)")
    return InStack(parts[0], AblateHead(int(parts[1]), int(parts[2])))
