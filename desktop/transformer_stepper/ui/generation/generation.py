"""Generation in the app: state/generation.py's GenerationModel as the QObject the Generate bar
and the prediction view connect to. Its notifications are Qt signals; it follows the session's
text and model. The logic of the runs is the GenerationModel's, tested without Qt
(tests/state/test_generation_requests.py)."""
from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from ...state.generation import GenerationModel


class GenerationControl(QObject, GenerationModel):
    changed = Signal()               # running or not, steps left, sampling: the controls follow
    failed = Signal(str)             # one line: why a run stopped early
    stepped = Signal(int)            # the id appended by the latest step

    def __init__(self, session) -> None:
        """`session`: the ui.session.Session that owns this control (not imported: it imports us)."""
        super().__init__(session, session=session)
        session.textChanged.connect(self.on_text)
        session.modelChanged.connect(self.stop)

    def _notify(self, name: str, *args) -> None:
        getattr(self, name).emit(*args)
