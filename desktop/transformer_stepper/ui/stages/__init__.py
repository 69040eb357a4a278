"""One view per stage; the order and the list of stages come from core/model/stages.py.

    view = create_view("softmax", session)
    for name, item in view.plots():   # item: a pyqtgraph GraphicsLayout, a figure on its own
        ...
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtWidgets import QWidget

from ...core.model.stages import STAGES
from .base import StageView
from .embedding import EmbeddingView
from .feed_forward import FeedForwardView
from .layer_output import LayerOutputView
from .logit_lens import LogitLensView
from .output_projection import OutputProjectionView
from .position_addition import PositionAdditionView
from .position_encoding import PositionEncodingView
from .prediction import PredictionView
from .qkv import QKVView
from .router import RouterView
from .scores import ScoresView
from .softmax import SoftmaxView
from .tokenize import TokenizeView
from .weighted_sum import WeightedSumView

VIEWS: dict[str, type[StageView]] = {view.stage_key: view for view in (
    TokenizeView, EmbeddingView, PositionEncodingView, PositionAdditionView, QKVView, ScoresView,
    SoftmaxView, WeightedSumView, OutputProjectionView, RouterView, FeedForwardView, LayerOutputView,
    PredictionView, LogitLensView)}

missing = [s.key for s in STAGES if s.key not in VIEWS]
assert not missing, f"stages without a view: {missing}"


def create_view(stage_key: str, session, parent: Optional[QWidget] = None,
                in_steps: bool = False) -> StageView:
    """A stage's view, drawn from the session's current trace (needs no main window);
    `in_steps`: built by StageView.build_step (the window's idle turns)."""
    try:
        view_class = VIEWS[stage_key]
    except KeyError:
        raise KeyError(f"no view for stage {stage_key!r}") from None
    return view_class(session, parent, in_steps=in_steps)


__all__ = ["StageView", "VIEWS", "create_view"]
