"""A session frozen at one model, trace, selection and temperature, whose layer and head an
export walks without touching the window: what the user sees stays as it is, and typing on
during a long export cannot mix two texts into one folder.

It is a Session (the views need its signals and methods) that keeps its own copy of what the
views read, through the Session's public interface only; it never opens or computes."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject

from ...core.model import Model
from ...core.trace import Trace
from .. import analysis
from ..session import Session


class SnapshotSession(Session):
    inline_work = True          # views compute what they need here (an export, not the live window)

    def __init__(self, model: Model, trace: Trace, *, layer: int = 0, head: int = 0,
                 selected: Optional[int] = None, temperature: float = 1.0,
                 labels: Optional[list[str]] = None, stage_key: Optional[str] = None,
                 parent: Optional[QObject] = None) -> None:
        super().__init__(parent)
        self._snapshot_model = model
        self._snapshot_trace = trace
        self._snapshot_labels = list(labels) if labels is not None else analysis.token_labels(trace, model.tokenizer)
        self._snapshot_layer = layer
        self._snapshot_head = head
        self._snapshot_selected = analysis.default_token(trace) if selected is None else selected
        self._snapshot_temperature = temperature
        self._snapshot_stage = stage_key or super().stage_key

    @classmethod
    def of(cls, session: Session, parent: Optional[QObject] = None) -> "SnapshotSession":
        """What `session` shows now (it must have a trace): the intervened trace while the
        stepper shows it."""
        if session.trace is None or session.model is None:
            raise ValueError("the session has no trace to export")
        return cls(session.model, session.shown_trace, layer=session.layer, head=session.head,
                   selected=session.selected_token, temperature=session.temperature,
                   labels=session.token_labels(), stage_key=session.stage_key, parent=parent)

    # -- what the views read -------------------------------------------------------------
    @property
    def model(self) -> Model:
        return self._snapshot_model

    @property
    def trace(self) -> Trace:
        return self._snapshot_trace

    @property
    def model_path(self) -> Optional[str]:
        return None

    @property
    def text(self) -> str:
        return self._snapshot_trace.text

    @property
    def layer(self) -> int:
        return self._snapshot_layer

    @property
    def head(self) -> int:
        return self._snapshot_head

    @property
    def selected_token(self) -> int:
        return self._snapshot_selected

    @property
    def temperature(self) -> float:
        return self._snapshot_temperature

    @property
    def stage_key(self) -> str:
        return self._snapshot_stage

    @property
    def busy(self) -> bool:
        return False

    def token_labels(self) -> list[str]:
        return self._snapshot_labels

    # -- what an export changes (and a view might, e.g. a click in a figure) ---------------
    def layer_ready(self, layer=None, trace=None) -> bool:
        return True        # an export draws every layer it walks, one at a time, on purpose

    def set_layer(self, layer: int) -> None:
        layer = min(max(int(layer), 0), self.model.config.n_layer - 1)
        if layer != self._snapshot_layer:
            self._snapshot_layer = layer
            self.layerChanged.emit(layer)

    def set_head(self, head: int) -> None:
        head = min(max(int(head), 0), self.model.config.n_head - 1)
        if head != self._snapshot_head:
            self._snapshot_head = head
            self.headChanged.emit(head)

    def select_token(self, index: int) -> None:
        if 0 <= index < self.trace.n_seq and index != self._snapshot_selected:
            self._snapshot_selected = int(index)
            self.selectionChanged.emit(self._snapshot_selected)

    def set_temperature(self, temperature: float) -> None:
        temperature = float(max(temperature, 1e-3))
        if temperature != self._snapshot_temperature:
            self._snapshot_temperature = temperature
            self.temperatureChanged.emit(temperature)

    def set_stage(self, key: str) -> None:
        self._snapshot_stage = key

    # -- nothing to open or compute ---------------------------------------------------------
    def open_model(self, path) -> None:
        raise RuntimeError("a snapshot session does not open models")

    def set_text(self, text: str, immediate: bool = False) -> None:
        raise RuntimeError("a snapshot session does not trace text")

    def compute_now(self) -> None:
        pass

    def step(self, direction: int) -> bool:
        return False
