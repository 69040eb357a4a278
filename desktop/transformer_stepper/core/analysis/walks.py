"""Guided walks ("Questions"): a question answered in 4–8 steps, each step a state of the app
(text, Compare's sentences and word, tab, stage, layer, head, selected word, interventions,
temperature) and a caption whose numbers are computed from that state, never written in.

The walks are data (resources/walks/*.json, read by io/walks.py); this module is the engine:
it resolves a step's state against a model (layer "last" -> the model's last layer, a head
past the model's count -> its last head, the selected word -> its token) and fills the
caption's named numbers from the readouts (core/analysis/walk_readouts.py) the step asks for. A caption
naming a number no readout gave is an error (WalkError), never a blank. No Qt, no files.

    walk = io.walks.load_walks()[0]
    for i in range(len(walk.steps)):
        shown = fill_step(model, walk, i)     # shown.state: what to set; shown.caption: the text
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field, replace
from typing import Mapping, Optional, Sequence

from ..model import stages
from ..model.errors import ModelError
from ..model.interventions import AblateHead, HeadTemperature, NoPositions, ShufflePositions
from ..trace.model import Model
from .walk_context import WALK_TRAINING_STEPS  # noqa: F401  (the walk panel starts that run)

TABS = ("stepper", "compare", "training", "positions", "attribution", "interventions")
# what a step (or a whole walk) may need of the model: the check, and what the caption says
NEEDS = {
    "decoder": (lambda c: c.causal and c.lm_head, "a decoder (a model that predicts the next token)"),
    "lm_head": (lambda c: c.lm_head, "a model with an output head (logits)"),
    "added_positions": (lambda c: c.position in ("learned", "sinusoidal"),
                        "a model that adds position vectors to the embeddings"),
    "encoder_decoder": (lambda c: False, "an encoder–decoder model (T5, BART, Marian)"),
}
INTERVENTION_KINDS = {"ablate_head": AblateHead, "head_temperature": HeadTemperature,
                      "no_positions": NoPositions, "shuffle_positions": ShufflePositions}


class WalkError(ModelError):
    """A walk that cannot be shown as written: a caption naming a number no readout gave, a
    readout that failed on this model. One line naming the walk and the step."""


@dataclass(frozen=True)
class StepState:
    """What a step sets; None: as the previous step left it (the first step: the defaults)."""
    text: Optional[str] = None
    sentences: Optional[tuple[str, ...]] = None
    word: Optional[str] = None
    tab: Optional[str] = None
    stage: Optional[str] = None
    layer: Optional[int | str] = None          # an int, or "last"
    head: Optional[int] = None
    select: Optional[str] = None               # a word of the text: its first token
    interventions: Optional[tuple[Mapping, ...]] = None
    temperature: Optional[float] = None
    translator: Optional[bool] = None          # open the built-in translator beside the window
    train: Optional[bool] = None               # start a short training run in the Training tab

    def over(self, earlier: "StepState") -> "StepState":
        """This step's settings over what the earlier steps left."""
        return StepState(**{name: getattr(self, name) if getattr(self, name) is not None
                            else getattr(earlier, name) for name in self.__dataclass_fields__})


DEFAULT_STATE = StepState(text="", sentences=(), word="", tab="stepper", stage="tokenize", layer=0,
                          head=0, select="", interventions=(), temperature=1.0, translator=False,
                          train=False)


@dataclass(frozen=True)
class Step:
    title: str
    caption: str                               # str.format template with named numbers
    state: StepState = StepState()
    readouts: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    otherwise: str = ""                        # the caption when the model lacks what it needs


@dataclass(frozen=True)
class Walk:
    key: str
    question: str
    summary: str
    steps: tuple[Step, ...]
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resolved:
    """A step's state made concrete for one model (what the app sets)."""
    text: str
    sentences: tuple[str, ...]
    word: str
    tab: str
    stage: str
    layer: int
    head: int
    select: str
    selected: Optional[int]                    # the token the caption speaks of (None: not filled yet)
    interventions: tuple
    temperature: float
    translator: bool = False
    train: bool = False


@dataclass(frozen=True)
class Shown:
    walk: Walk
    index: int
    state: Resolved
    caption: str
    applies: bool = True                       # False: the model lacks what the step needs
    numbers: Mapping[str, object] = field(default_factory=dict)


def missing_needs(needs: Sequence[str], config) -> list[str]:
    return [NEEDS[n][1] for n in needs if not NEEDS[n][0](config)]


def state_at(walk: Walk, index: int) -> StepState:
    """The settings in force at step `index`: every step's over the ones before it."""
    state = DEFAULT_STATE
    for step in walk.steps[:index + 1]:
        state = step.state.over(state)
    return state


def interventions_of(items: Sequence[Mapping], layer: int, head: int, config) -> tuple:
    """The step's interventions, with "layer"/"head" of "current" (or absent) taken from the state."""
    made = []
    for item in items:
        kind = INTERVENTION_KINDS[item["kind"]]
        if kind in (AblateHead, HeadTemperature):
            where = {"layer": _layer(item.get("layer", "current"), layer, config),
                     "head": _head(item.get("head", "current"), head, config)}
            if kind is HeadTemperature:
                where["temperature"] = float(item["temperature"])
            made.append(kind(**where))
        elif kind is ShufflePositions:
            made.append(kind(seed=int(item.get("seed", 0))))
        else:
            made.append(kind())
    return tuple(made)


def _layer(value, current: int, config) -> int:
    if value == "current":
        return current
    if value == "last":
        return config.n_layer - 1
    return min(int(value), config.n_layer - 1)


def _head(value, current: int, config) -> int:
    return current if value == "current" else min(int(value), config.n_head - 1)


def resolve(model: Model, walk: Walk, index: int, default_text: str) -> Resolved:
    config = model.config
    state = state_at(walk, index)
    layer = _layer(state.layer, 0, config)
    head = _head(state.head, 0, config)
    stage = state.stage
    if not stages.stage(stage).available(config):        # e.g. position addition on rotary
        stage = "embedding"
    return Resolved(text=state.text or default_text, sentences=tuple(state.sentences), word=state.word,
                    tab=state.tab, stage=stage, layer=layer, head=head, select=state.select,
                    selected=None, interventions=interventions_of(state.interventions, layer, head, config),
                    temperature=float(state.temperature), translator=bool(state.translator),
                    train=bool(state.train))


def fill_step(model: Model, walk: Walk, index: int, default_text: str = "",
              extras: Optional[Mapping] = None) -> Shown:
    """Step `index` of `walk` on `model`: its concrete state and its caption with every number
    computed from that state (extras: facts read from files, e.g. the positions laboratory's
    results rows under "positions_results")."""
    from .walk_readout_set import Context, readout

    step = walk.steps[index]
    where = f"walk '{walk.key}', step {index + 1} ('{step.title}')"
    resolved = resolve(model, walk, index, default_text)
    context = Context(model, resolved, dict(extras or {}))
    missing = missing_needs(walk.needs + step.needs, model.config)
    template = step.otherwise if missing else step.caption
    names = ("model",) if missing else ("model", "selection") + step.readouts
    numbers: dict = {"needs": "; ".join(missing)}
    for name in names:
        try:
            numbers.update(readout(name, context))
        except ModelError as exc:
            raise WalkError(f"{where}: readout '{name}' failed on {model.name}: {exc}") from None
    # the token the caption speaks of is the one selected: a readout about another token than
    # the step's word (the repeated token, the last one for a prediction) names it as `focus`
    resolved = replace(resolved, selected=int(numbers.get("focus", context.position)))
    return Shown(walk, index, resolved, fill(template, numbers, where), applies=not missing,
                 numbers=numbers)


def fill(template: str, numbers: Mapping[str, object], where: str) -> str:
    """The template with its named numbers; WalkError for a name not given."""
    for _, name, _, _ in string.Formatter().parse(template):
        if name is not None and name not in numbers:
            raise WalkError(f"{where}: the caption names {{{name}}}, which no readout gave")
    try:
        return template.format(**numbers)
    except (ValueError, TypeError, IndexError) as exc:
        raise WalkError(f"{where}: the caption does not format: {exc}") from None
