"""Provenance of a weight: where a parameter's value comes from. Addressed as "param:NAME"
with NAME a core parameter ("param:h.0.attn.q.w", (row, col)). A plain float checkpoint stores
the value itself; a quantized one (GGUF) stores integer codes and block scales, and the
parameter store says how they give the value (`params.weight_steps(name, index)`, duck-typed so
the core stays free of file formats: io/checkpoint_params.py asks the checkpoint)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .terms import Explanation, Step

PARAM = "param:"


@dataclass(frozen=True)
class WeightSteps:
    """What a quantized store says about one weight: where it is stored, the quant type's
    formula, the steps from the stored numbers to the value (the last one is it), and Python
    that recomputes it from the model."""
    source: str
    formula: str
    steps: tuple[tuple[str, float], ...]
    python: str
    notes: tuple[str, ...] = ()


def parameter_value(model, name: str, index: tuple[int, ...]) -> float:
    """The value the forward pass reads (a table's one row only, not the whole table widened)."""
    if len(index) == 2 and hasattr(model.params, "rows"):
        return float(model.params.rows(name, np.array([index[0]]))[0, index[1]])
    return float(model.params[name][index])


def weight_steps(model, name: str, index: tuple[int, ...]):
    """The store's WeightSteps for param[index], or None when it stores plain floats."""
    steps = getattr(model.params, "weight_steps", None)
    return None if steps is None else steps(name, index)


def explain_parameter(model, trace, address: str, index: tuple[int, ...]) -> Explanation:
    name = address[len(PARAM):]
    if name not in model.params:
        raise KeyError(f"the model has no parameter {name!r}")
    shape = model.params.shape(name) if hasattr(model.params, "shape") else np.shape(model.params[name])
    if len(index) != len(shape) or any(not 0 <= k < n for k, n in zip(index, shape)):
        raise IndexError(f"{name}: index {index} is outside the shape {tuple(shape)}")
    traced = parameter_value(model, name, index)
    where = ", ".join(str(k) for k in index)
    arithmetic = weight_steps(model, name, index)
    if arithmetic is None:
        return Explanation(address, index, f"weight {name}[{where}]",
                           "w = the value stored in the weights file, read as float32", {}, (), 0.0, 0,
                           0.0, "", (Step("stored value (as float32)", traced),), traced, traced,
                           f"value = float(model.params[{name!r}][{where}])\n",
                           notes=("a parameter: learned in training, the same for every input",))
    steps = tuple(Step(label, float(value)) for label, value in arithmetic.steps)
    return Explanation(address, index, f"weight {name}[{where}]: {arithmetic.source}", arithmetic.formula,
                       {}, (), 0.0, 0, 0.0, "", steps, steps[-1].value, traced, arithmetic.python,
                       notes=arithmetic.notes)
