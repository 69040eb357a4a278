"""What a view shows, without Qt: the model and its trace, the layer, head, selected token,
stage and softmax temperature, the tokens' axis labels; and the changes the views hear of.

The stage views read this interface and nothing more. The live session (state/session.py)
also hosts models: it opens them and traces text through a scheduler, debounces typing and
runs generation. A ViewModel made directly holds one model and trace (an export's snapshot):
views compute what they read when they read it (`inline_work`); nothing is opened, traced or
generated.

Changes are announced through `_notify(name, *args)`; the names are the Qt signals of
ui/view_state.py (modelChanged, traceChanged, layerChanged(int), layerReady(int),
headChanged(int), selectionChanged(int), stageChanged(str), temperatureChanged(float),
provenanceRequested(str, tuple), dequantizationRequested(str), shownTraceChanged). Without Qt they reach `events`
(state/events.py). The model and the trace change together and are announced once: when
modelChanged is notified, `trace` is the new model's trace (or None), never the previous
model's."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..core.model import stages
from ..core.trace.generate import Sampling
from ..core.analysis.labels import default_token, token_labels
from ..core.trace.model import Model
from ..core.trace.trace import Trace
from .events import Event, Events


class FixedSampling:
    """Generation as a view state without a host sees it: the sampling the prediction view
    draws the distribution with; nothing runs, so a click on a bar appends nothing."""
    running = False

    def __init__(self, sampling: Sampling = Sampling()) -> None:
        self.sampling = sampling
        self.changed = Event()

    def append(self, token_id: int) -> None:
        pass


def same_up_to(previous: Optional[Trace], trace: Trace, position: int) -> bool:
    """Do both traces hold the same model's same tokens at 0 … position?"""
    return (previous is not None and 0 <= position < min(previous.n_seq, trace.n_seq)
            and previous.config == trace.config
            and np.array_equal(previous.input_ids[:position + 1], trace.input_ids[:position + 1]))


class ViewModel:
    # views compute what they need where they draw (the live session: through its scheduler)
    inline_work = True

    def __init__(self, model: Optional[Model] = None, trace: Optional[Trace] = None, *,
                 layer: int = 0, head: int = 0, selected: Optional[int] = None,
                 temperature: float = 1.0, labels: Optional[list[str]] = None,
                 stage_key: Optional[str] = None, **rest) -> None:
        super().__init__(**rest)
        self.events = Events()
        self._model = model
        self._trace = trace
        self._layer = layer
        self._head = head
        self._temperature = temperature
        self._stage = stage_key or stages.STAGES[0].key
        if trace is None:
            self._labels: list[str] = []
            self._selected = -1           # none yet: the first ordinary token once traced
        else:
            self._labels = list(labels) if labels is not None else token_labels(trace, model.tokenizer)
            self._selected = default_token(trace) if selected is None else selected
        # what the prediction view reads and calls (a host's runs generation: ui/generation/generation.py)
        self.generation = FixedSampling()

    def _notify(self, name: str, *args) -> None:
        """Announce a change (ui/view_state.py: emit the Qt signal of that name)."""
        self.events.notify(name, *args)

    # -- what the views read -------------------------------------------------------------
    @property
    def model(self) -> Optional[Model]:
        return self._model

    @property
    def trace(self) -> Optional[Trace]:
        return self._trace

    @property
    def layer(self) -> int:
        return self._layer

    @property
    def head(self) -> int:
        return self._head

    @property
    def selected_token(self) -> int:
        return self._selected

    @property
    def stage_key(self) -> str:
        return self._stage

    @property
    def temperature(self) -> float:
        return self._temperature

    def token_labels(self) -> list[str]:
        """How each token of the current trace reads on an axis (GPT-2's 'Ġ' shown as a space)."""
        return self._labels

    def available_stages(self) -> list[stages.Stage]:
        return stages.available_stages(self._model.config if self._model else None)

    # -- a layer's detail ------------------------------------------------------------------
    def layer_ready(self, layer: Optional[int] = None, trace: Optional[Trace] = None) -> bool:
        """Can the views read this layer's detail (default: the current layer) of `trace`
        (default: the one shown) without computing it on the GUI thread? Here always:
        computing where they draw is the point (an export draws every layer it walks, one at
        a time)."""
        return True

    def prepare_layer(self, layer: int, trace: Optional[Trace] = None) -> None:
        """Compute a layer's detail ahead of drawing (the live session: in a worker, then
        layerReady); here the views compute it when they read it."""

    def prepare_next_layer(self) -> None:
        """The layer after the shown one, while the user reads: once the shown one is held and
        only when the detail budget holds the next beside it (LayerCache.room_beside)."""
        trace = self._trace
        if trace is not None and trace.cache.room_beside(self._layer):
            self.prepare_layer(self._layer + 1)

    # -- what the stage views draw -------------------------------------------------------------
    @property
    def shown_trace(self) -> Optional[Trace]:
        """The trace the stage views draw (the live session: the intervened one while the
        stepper shows it); here the trace."""
        return self.trace

    @property
    def waiting_for_intervened(self) -> bool:
        """The views wait for an intervened pass still running (never, here)."""
        return False

    @property
    def against(self) -> Optional[Trace]:
        """While the stage views show A − B (a second model opened against this one): B's trace
        of the current text; here none."""
        return None

    @property
    def waiting_for_against(self) -> bool:
        """A − B was asked for and B's trace of this text is still running (never, here)."""
        return False

    # -- model and trace, together ------------------------------------------------------------
    def _take_model(self, model: Model, trace: Optional[Trace]) -> None:
        """A new model and its trace (None: not traced), with layer, head and stage kept within
        it: set together, before any signal."""
        config = model.config
        self._model = model
        self._layer = min(self._layer, config.n_layer - 1)
        self._head = min(self._head, config.n_head - 1)
        if not stages.stage(self._stage).available(config):
            self._stage = stages.available_stages(config)[-1].key
        self._take_trace(trace)

    def _take_trace(self, trace: Optional[Trace]) -> None:
        """A new trace of the current model (the previous one is released here: views keep no
        reference), with the selection and layer kept within it. The selection follows its
        token while the text up to it is unchanged (typing after it, a generation step) if the
        user chose it; otherwise (the default token was selected, an edit before it, another
        model) it goes to the new trace's default token."""
        previous, self._trace = self._trace, trace
        if trace is None:
            self._labels = []
            return
        self._labels = token_labels(trace, self._model.tokenizer)
        chosen = previous is not None and self._selected != default_token(previous)
        if not (chosen and same_up_to(previous, trace, self._selected)):
            self._selected = default_token(trace)
        self._layer = min(self._layer, trace.config.n_layer - 1)

    # -- what the user (or an export) changes ------------------------------------------------
    def set_layer(self, layer: int) -> None:
        if self._model is None:
            return
        layer = int(np.clip(layer, 0, self._model.config.n_layer - 1))
        if layer != self._layer:
            self._layer = layer
            self.prepare_layer(layer)
            self._notify("layerChanged", layer)
            self.prepare_next_layer()

    def set_head(self, head: int) -> None:
        if self._model is None:
            return
        head = int(np.clip(head, 0, self._model.config.n_head - 1))
        if head != self._head:
            self._head = head
            self._notify("headChanged", head)

    def select_token(self, index: int) -> None:
        if self._trace is None or not 0 <= index < self._trace.n_seq:
            return
        if index != self._selected:
            self._selected = int(index)
            self._notify("selectionChanged", self._selected)

    def set_stage(self, key: str) -> None:
        stage = stages.stage(key)
        if not stage.available(self._model.config if self._model else None):
            return
        if key != self._stage:
            self._stage = key
            self._notify("stageChanged", key)

    def step(self, direction: int) -> bool:
        """One stage forward (+1) or back (-1); past a layer's last stage into the next layer."""
        if self._model is None:
            return False
        target = stages.step(self._stage, self._layer, direction, self._model.config)
        if target is None:
            return False
        key, layer = target
        self.set_layer(layer)
        self.set_stage(key)
        return True

    def set_temperature(self, temperature: float) -> None:
        temperature = float(max(temperature, 1e-3))
        if temperature != self._temperature:
            self._temperature = temperature
            self._notify("temperatureChanged", temperature)

    def request_dequantization(self, param: str) -> None:
        """Ask for the stored blocks behind a GGUF model's parameter (a weight stage's
        "Dequantization…" button); the dequantization panel answers."""
        if self._model is not None:
            self._notify("dequantizationRequested", param)

    def request_provenance(self, name: str, index) -> None:
        """Ask for the arithmetic behind the current trace's value name[index] (an Alt-click
        on a plot); the provenance panel answers (ui/interventions/provenance_panel.py)."""
        if self._trace is not None:
            self._notify("provenanceRequested", name, tuple(int(k) for k in index))
