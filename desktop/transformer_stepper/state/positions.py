"""The Positions tab's side of the model opened in the stepper, without Qt: its E–P
interference (core/training/positions_lab.py) measured in a worker on the tab's Scheduler, and
what the tab says meanwhile (`YourModel`).

A new model makes the measurement stale (`model_changed`); the tab measures when it is shown.
The latest request wins (state/requests.py): a measurement still running when another model is
measured, or when the tab closes (`drop`), is dropped when it lands. Notifies, through
`events`: changed(YourModel)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core.training import positions_lab as lab
from .events import Events
from .requests import Latest, Requests
from .scheduler import Job, Scheduler


@dataclass(frozen=True)
class YourModel:
    """The opened model's side: its name and interference (None: nothing to measure, `why`)."""
    name: str = ""
    state: str = "none"               # "none" (no model), "computing", "measured", "without", "failed"
    interference: Optional[dict] = None
    why: str = ""


def why_no_vector(position: str) -> str:
    """One line for a model without a position vector to measure."""
    return {"rotary": "rotary positions turn q and k; no p is added to e, nothing to measure",
            "none": "no positions at all; no p is added to e, nothing to measure"}.get(
        position, f"positions '{position}': no position table to measure")


class YourModelMeasurement:
    def __init__(self, scheduler: Scheduler) -> None:
        self.workers = scheduler
        self.events = Events()
        self._measuring = Latest(Requests())
        self.your_model = YourModel()
        self.stale = True              # the opened model changed since it was last measured

    def model_changed(self, model, shown: bool) -> None:
        """Another model opened: measured at once if the tab is shown, else when it is."""
        self.stale = True
        if shown:
            self.measure(model)

    def measure(self, model) -> None:
        """Measure `model`'s E–P interference in a worker (GPT-2: seconds); a model without a
        position vector (or none) is said so at once."""
        self.stale = False
        number = self._measuring.new()
        if model is None:
            self._set(YourModel())
            return
        name, position = model.name, model.config.position
        if lab.table_positions(model.config, model.params) == 0:
            self._set(YourModel(name, "without", None, why_no_vector(position)))
            return
        self._set(YourModel(name, "computing"))
        self.workers.start(Job(number, lab.model_interference, (model.params, model.config)),
                           lambda request, result: self._measured(request, name, result),
                           lambda request, message, _user: self._failed(request, name, message))

    def drop(self) -> None:
        """A result still on its way is dropped (the tab closes)."""
        self._measuring.drop()

    def _measured(self, request: int, name: str, interference: Optional[dict]) -> None:
        if self._measuring.is_latest(request):
            self._set(YourModel(name, "measured", interference))

    def _failed(self, request: int, name: str, message: str) -> None:
        if self._measuring.is_latest(request):
            self._set(YourModel(name, "failed", None, message))

    def _set(self, state: YourModel) -> None:
        self.your_model = state
        self.events.notify("changed", state)
