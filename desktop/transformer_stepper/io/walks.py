"""The guided walks' files: resources/walks/*.json, one walk each, read into core/analysis/walks.py's
Walk (validated field by field: a bad file gives one ModelError line naming it and the field),
and the facts from files their readouts quote (the positions laboratory's results)."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Optional

from ..core.model import stages
from ..core.model.errors import ModelError
from ..core.analysis.walks import INTERVENTION_KINDS, NEEDS, TABS, Step, StepState, Walk
from .resources import resources_dir

STAGE_KEYS = tuple(s.key for s in stages.STAGES)


def walks_dir() -> Path:
    return resources_dir() / "walks"


def load_walks(folder: Optional[Path] = None) -> list[Walk]:
    """Every walk in the folder, in the order of their file names (01-..., 02-...)."""
    folder = walks_dir() if folder is None else Path(folder)
    return [read_walk(path) for path in sorted(folder.glob("*.json"))]


def read_walk(path: Path) -> Walk:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: cannot read it ({exc})") from None
    except ValueError as exc:
        raise ModelError(f"{path}: not JSON ({exc})") from None
    where = str(path)
    _object(data, where, ("question", "summary", "steps"), ("needs",))
    steps = data["steps"]
    if not isinstance(steps, list) or not 1 <= len(steps) <= 10:
        raise ModelError(f"{where}: 'steps' must be a list of 1 to 10 steps")
    return Walk(key=Path(path).stem, question=_text(data, "question", where),
                summary=_text(data, "summary", where),
                steps=tuple(_step(step, f"{where}, step {n + 1}") for n, step in enumerate(steps)),
                needs=_needs(data.get("needs", []), where))


def _object(data, where: str, required: tuple, optional: tuple) -> None:
    if not isinstance(data, dict):
        raise ModelError(f"{where}: must be a JSON object")
    for key in required:
        if key not in data:
            raise ModelError(f"{where}: '{key}' is missing")
    for key in data:
        if key not in required + optional:
            raise ModelError(f"{where}: unknown field '{key}'")


def _text(data: dict, key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise ModelError(f"{where}: '{key}' must be a string")
    return value


def _needs(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or any(v not in NEEDS for v in value):
        raise ModelError(f"{where}: 'needs' must be a list of {', '.join(NEEDS)}")
    return tuple(value)


def _step(data, where: str) -> Step:
    _object(data, where, ("title", "caption"), ("state", "readouts", "needs", "otherwise"))
    readouts = data.get("readouts", [])
    if not isinstance(readouts, list) or not all(isinstance(r, str) for r in readouts):
        raise ModelError(f"{where}: 'readouts' must be a list of names")
    from ..core.analysis.walk_readout_set import READOUTS

    for name in readouts:
        if name not in READOUTS:
            raise ModelError(f"{where}: no readout named '{name}'")
    needs = _needs(data.get("needs", []), where)
    return Step(title=_text(data, "title", where), caption=_text(data, "caption", where),
                state=step_state(data.get("state", {}), where), readouts=tuple(readouts), needs=needs,
                otherwise=_text(data, "otherwise", where) or "This step needs {needs}: {model_name} is not one.")


def step_state(data, where: str) -> StepState:
    fields = ("text", "sentences", "word", "tab", "stage", "layer", "head", "select", "interventions",
              "temperature", "translator", "train")
    _object(data, f"{where}, state", (), fields)
    where = f"{where}, state"
    for key in ("text", "word", "select"):
        if key in data and not isinstance(data[key], str):
            raise ModelError(f"{where}: '{key}' must be a string")
    sentences = data.get("sentences")
    if sentences is not None and (not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences)):
        raise ModelError(f"{where}: 'sentences' must be a list of strings")
    if "tab" in data and data["tab"] not in TABS:
        raise ModelError(f"{where}: 'tab' must be one of {', '.join(TABS)}")
    if "stage" in data and data["stage"] not in STAGE_KEYS:
        raise ModelError(f"{where}: 'stage' must be one of {', '.join(STAGE_KEYS)}")
    layer = data.get("layer")
    if layer is not None and layer != "last" and not _count(layer):
        raise ModelError(f"{where}: 'layer' must be a non-negative integer or \"last\"")
    if "head" in data and not _count(data["head"]):
        raise ModelError(f"{where}: 'head' must be a non-negative integer")
    temperature = data.get("temperature")
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                    or not 0.05 <= temperature <= 20):
        raise ModelError(f"{where}: 'temperature' must be a number from 0.05 to 20")
    translator, train = data.get("translator"), data.get("train")
    for key, value in (("translator", translator), ("train", train)):
        if value is not None and not isinstance(value, bool):
            raise ModelError(f"{where}: '{key}' must be true or false")
    items = data.get("interventions")
    if items is not None:
        if not isinstance(items, list) or not all(isinstance(i, dict) and i.get("kind") in INTERVENTION_KINDS
                                                  for i in items):
            raise ModelError(f"{where}: 'interventions' must be a list of objects with a 'kind' of "
                             f"{', '.join(INTERVENTION_KINDS)}")
        items = tuple(dict(i) for i in items)
    return StepState(text=data.get("text"), sentences=None if sentences is None else tuple(sentences),
                     word=data.get("word"), tab=data.get("tab"), stage=data.get("stage"), layer=layer,
                     head=data.get("head"), select=data.get("select"), interventions=items,
                     temperature=None if temperature is None else float(temperature),
                     translator=translator, train=train)


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10_000


def walk_extras() -> dict:
    """Facts from files the readouts quote: the shipped positions laboratory's results rows, and
    how to load the built-in translator (called by its readout, in the walk's worker)."""
    from .positions_lab import read_results_csv

    extras: dict = {"translator": load_builtin_translator}
    try:
        extras["positions_results"] = read_results_csv(resources_dir() / "positions" / "results.csv")
    except ModelError:
        pass
    return extras


@lru_cache(maxsize=1)
def load_builtin_translator():
    from .loader import load_model
    from .resources import builtin_translator_dir

    return load_model(str(builtin_translator_dir()))
