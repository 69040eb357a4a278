"""Interventions: change one thing in the forward pass and see what changes everywhere.

    from transformer_stepper import AblateHead, NoPositions
    clean = model.trace(text)
    ablated = model.trace(text, interventions=[AblateHead(layer=0, head=1)])

They act inside the one forward pass (core/model/forward.py reads them from the attention context
and the embedding step), so a lazily computed layer gets them too; the trace records which
interventions made it (`trace.interventions`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Sequence

import numpy as np

from .config import ModelConfig
from .errors import ModelError


@dataclass(frozen=True)
class AblateHead:
    """A head's output (weights · V) replaced before the output projection: by zeros, or by
    its mean over positions."""
    layer: int
    head: int
    mode: Literal["zero", "mean"] = "zero"


@dataclass(frozen=True)
class HeadTemperature:
    """A head's softmax run as softmax(scores / temperature)."""
    layer: int
    head: int
    temperature: float


@dataclass(frozen=True)
class NoPositions:
    """No position information: no position vector added (learned, sinusoidal), or no rotation
    (rotary)."""


@dataclass(frozen=True)
class ShufflePositions:
    """The position vectors (or rotation angles) of the text's positions permuted (seeded):
    each token gets another position's encoding."""
    seed: int = 0


@dataclass(frozen=True)
class SwapEmbedding:
    """The token at `position` looked up as `token_id` (its row of E replaced), the rest as is."""
    position: int
    token_id: int


@dataclass(frozen=True)
class DisableExpert:
    """A mixture-of-experts layer's expert switched off: its router logit set to -inf before the
    softmax, so every token goes to its next best expert instead."""
    layer: int
    expert: int


@dataclass(frozen=True)
class ForceExpert:
    """The token at `position` sent to `expert` in a mixture-of-experts layer: the expert takes
    the place of the token's k-th choice (when not chosen already), with its softmax probability
    as its gate (then normalised where the model normalises the top-k)."""
    layer: int
    position: int
    expert: int


Intervention = (AblateHead | HeadTemperature | NoPositions | ShufflePositions | SwapEmbedding | DisableExpert
                | ForceExpert)
LAYER_EDITS = (AblateHead, HeadTemperature, DisableExpert, ForceExpert)     # act inside one layer


def describe(intervention: Intervention) -> str:
    """One line, as the export and the chip row show it."""
    if isinstance(intervention, AblateHead):
        return f"ablate layer {intervention.layer} head {intervention.head} ({intervention.mode})"
    if isinstance(intervention, HeadTemperature):
        return f"temperature {intervention.temperature:g} on layer {intervention.layer} head {intervention.head}"
    if isinstance(intervention, NoPositions):
        return "no positions"
    if isinstance(intervention, ShufflePositions):
        return f"positions shuffled (seed {intervention.seed})"
    if isinstance(intervention, DisableExpert):
        return f"expert {intervention.expert} of layer {intervention.layer} disabled"
    if isinstance(intervention, ForceExpert):
        return f"position {intervention.position} sent to expert {intervention.expert} in layer {intervention.layer}"
    return f"position {intervention.position} looked up as token {intervention.token_id}"


def describe_all(interventions: Sequence[Intervention]) -> str:
    """The chip row: '[ablate layer 1 head 2 (zero)] · [no positions]'."""
    return " · ".join(f"[{describe(item)}]" for item in interventions)


def check(interventions: Sequence[Intervention], config: ModelConfig, n_seq: int) -> tuple[Intervention, ...]:
    """-> the interventions as a tuple; one ModelError line naming the first bad one."""
    checked = []
    for item in interventions:
        where = describe(item) if hasattr(item, "__dataclass_fields__") else repr(item)
        if isinstance(item, (AblateHead, HeadTemperature)):
            if not 0 <= item.layer < config.n_layer:
                raise ModelError(f"{where}: layer {item.layer} is out of range (0..{config.n_layer - 1})")
            if not 0 <= item.head < config.n_head:
                raise ModelError(f"{where}: head {item.head} is out of range (0..{config.n_head - 1})")
            if isinstance(item, AblateHead) and item.mode not in ("zero", "mean"):
                raise ModelError(f"{where}: mode must be 'zero' or 'mean', got {item.mode!r}")
            if isinstance(item, HeadTemperature) and not (np.isfinite(item.temperature) and item.temperature > 0):
                raise ModelError(f"{where}: temperature must be positive, got {item.temperature!r}")
        elif isinstance(item, SwapEmbedding):
            if not 0 <= item.position < n_seq:
                raise ModelError(f"{where}: position {item.position} is outside the text's {n_seq} tokens")
            if not 0 <= item.token_id < config.n_vocab:
                raise ModelError(f"{where}: token id {item.token_id} is outside the vocabulary of {config.n_vocab}")
        elif isinstance(item, (DisableExpert, ForceExpert)):
            _check_expert(item, where, config, n_seq)
        elif not isinstance(item, (NoPositions, ShufflePositions)):
            raise ModelError(f"unknown intervention {item!r}")
        checked.append(item)
    return tuple(checked)


def _check_expert(item, where: str, config: ModelConfig, n_seq: int) -> None:
    if not 0 <= item.layer < config.n_layer:
        raise ModelError(f"{where}: layer {item.layer} is out of range (0..{config.n_layer - 1})")
    if not config.is_moe_layer(item.layer):
        raise ModelError(f"{where}: layer {item.layer} has no experts (a dense feed-forward)")
    if not 0 <= item.expert < config.n_expert:
        raise ModelError(f"{where}: expert {item.expert} is out of range (0..{config.n_expert - 1})")
    if isinstance(item, ForceExpert) and not 0 <= item.position < n_seq:
        raise ModelError(f"{where}: position {item.position} is outside the text's {n_seq} tokens")
    if isinstance(item, DisableExpert) and config.n_expert - 1 < config.n_expert_used:
        raise ModelError(f"{where}: each token needs {config.n_expert_used} of the other "
                         f"{config.n_expert - 1} experts")


def router_edits(interventions: Sequence[Intervention], layer: int):
    """-> core.model.moe.RouterEdits for one layer (experts disabled, tokens forced), or None."""
    from .moe import RouterEdits

    disabled = frozenset(i.expert for i in interventions if isinstance(i, DisableExpert) and i.layer == layer)
    forced = {i.position: i.expert for i in interventions if isinstance(i, ForceExpert) and i.layer == layer}
    return RouterEdits(disabled, forced) if disabled or forced else None


def position_order(interventions: Sequence[Intervention], n_seq: int) -> Optional[np.ndarray]:
    """[n_seq] which position's encoding each token gets, or None (the usual order)."""
    for item in interventions:
        if isinstance(item, ShufflePositions):
            return np.random.default_rng(item.seed).permutation(n_seq)
    return None


def no_positions(interventions: Sequence[Intervention]) -> bool:
    return any(isinstance(item, NoPositions) for item in interventions)


def head_edits(interventions: Sequence[Intervention], layer: int):
    """-> (ablations {head: mode}, temperatures {head: T}) for one layer."""
    ablations = {i.head: i.mode for i in interventions if isinstance(i, AblateHead) and i.layer == layer}
    temperatures = {i.head: i.temperature for i in interventions
                    if isinstance(i, HeadTemperature) and i.layer == layer}
    return ablations, temperatures


def first_layer(interventions: Sequence[Intervention]) -> Optional[int]:
    """The first layer an intervention acts in when every one acts inside a layer (heads);
    None when one acts before the layers (positions, rows of E) or there is none."""
    if not interventions or not all(isinstance(i, LAYER_EDITS) for i in interventions):
        return None
    return min(i.layer for i in interventions)


def swapped_ids(interventions: Sequence[Intervention], input_ids: np.ndarray) -> np.ndarray:
    ids = np.array(input_ids, copy=True)
    for item in interventions:
        if isinstance(item, SwapEmbedding):
            ids[item.position] = item.token_id
    return ids
