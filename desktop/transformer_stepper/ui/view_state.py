"""The ViewModel (state/view.py) as the QObject the stage views connect to: each change the
model notifies is emitted as the Qt signal of that name. Nothing else lives here: what a view
shows and how it changes is the ViewModel's, tested without Qt (tests/state/)."""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject, Signal

from ..core.trace.generate import Sampling
from ..state.view import ViewModel


class FixedSampling(QObject):
    """Generation as a view state without a host sees it (state/view.py's, with a Qt signal)."""
    changed = Signal()
    running = False

    def __init__(self, sampling: Sampling = Sampling(), parent: Optional[QObject] = None) -> None:
        super().__init__(parent)
        self.sampling = sampling

    def append(self, token_id: int) -> None:
        pass


class ViewState(QObject, ViewModel):
    modelChanged = Signal()              # a new model and its trace are in place; traceChanged follows
    traceChanged = Signal()              # a new trace (new text or new model)
    layerChanged = Signal(int)
    layerReady = Signal(int)             # a layer's detail has been computed (in a worker)
    headChanged = Signal(int)
    selectionChanged = Signal(int)       # the selected token (query) index
    stageChanged = Signal(str)
    temperatureChanged = Signal(float)
    provenanceRequested = Signal(str, object)   # where does trace value name[index] come from?
    dequantizationRequested = Signal(str)        # show a GGUF parameter's stored blocks
    shownTraceChanged = Signal()         # the stage views draw another trace (clean <-> intervened)
    frames = None                        # the frame scheduler (ui/frames.py) of a live session

    def __init__(self, *args, parent: Optional[QObject] = None, **state) -> None:
        # QObject's __init__ hands `state` on to ViewModel's (cooperative initialisation)
        if args:
            state.update(zip(("model", "trace"), args))
        super().__init__(parent, **state)
        self.generation = self._new_generation()      # a QObject: once this one is whole

    def _notify(self, name: str, *args) -> None:
        getattr(self, name).emit(*args)

    def _new_generation(self) -> QObject:
        """What `generation` is: the prediction view reads `sampling`, listens to `changed` and
        calls `append(token id)` (the live session runs it: ui/generation/generation.py)."""
        return FixedSampling(parent=self)
