"""The translation window's Compare page: the main window's Compare view (ui/compare/) over the
encoder — the same source word in several sentences, identical lookup rows, per-layer cosines,
the map, nearest words — with the encoder as its model (core/analysis/seq2seq_compare.EncoderSide). It
has a session of its own (what the Compare view reads: model, layer, head, the frame
scheduler), fed the window's model and following its layer and head."""
from __future__ import annotations

from typing import Optional

from PySide6.QtWidgets import QVBoxLayout, QWidget

from ...core.analysis.seq2seq_compare import EncoderSide
from ..compare.view import CompareView
from ..session import Session


class EncoderSession(Session):
    """A session whose model is set, not opened: the encoder side of the window's model."""

    def adopt(self, model) -> None:
        self._take_model(model, None)
        self._notify("modelChanged")
        self._notify("layerChanged", self._layer)
        self._notify("headChanged", self._head)


class EncoderComparePage(QWidget):
    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.session = EncoderSession(parent=self)
        self.view = CompareView(self.session)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.view)
        self._source = None                 # the Seq2SeqModel the session's encoder is of

    def set_model(self, model, layer: int, head: int) -> None:
        """The window's model (made into its encoder side once per model), layer and head."""
        if model is not self._source:
            self._source = model
            self.session.adopt(EncoderSide(model))
        self.session.set_layer(min(layer, model.config.encoder.n_layer - 1))
        self.session.set_head(min(head, model.config.encoder.n_head - 1))

    def shutdown(self, msecs: int = -1) -> bool:
        done = self.view.shutdown(msecs)
        return self.session.shutdown(msecs) and done
