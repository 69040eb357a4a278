"""Putting the window into a state from outside the user's hands: a guided walk's step
(ui/walks/walk_panel.py) or an opened session file (ui/menus/session_file.py). Text, Compare's sentences
and word, tab, stage, layer, head, the selected token, the softmax temperature and the
interventions, each set through the same calls the user's widgets make, so every view follows.

The selected token is an index into the text's trace: a new text traces in a worker, so the
selection is kept until the trace of that text arrives, then set."""
from __future__ import annotations

from typing import Optional, Sequence

from ..core.model import interventions as lib


class PendingSelection:
    """Select token `index` once the session's trace is of `text` (at once if it is)."""

    def __init__(self, session) -> None:
        self.session = session
        self.want: Optional[tuple[str, int]] = None
        session.traceChanged.connect(self._try)

    def set(self, text: str, index: int) -> None:
        self.want = (text, int(index))
        self._try()

    def _try(self) -> None:
        trace = self.session.trace
        if self.want is not None and trace is not None and trace.text == self.want[0]:
            self.session.select_token(self.want[1])
            self.want = None


def set_interventions(window, interventions: Sequence) -> None:
    """The interventions set on the Interventions tab's controls (which hand them to the session),
    so the tab shows what runs."""
    view = window.tabs.view("interventions")
    view.clear_all()
    for item in interventions:
        if isinstance(item, lib.AblateHead):
            view.mode.setCurrentText(item.mode)
            view.set_head_ablated(item.layer, item.head)
        elif isinstance(item, lib.NoPositions):
            view.no_positions.setChecked(True)
        elif isinstance(item, lib.ShufflePositions):
            view.seed.setValue(item.seed)
            view.shuffle.setChecked(True)
        elif isinstance(item, lib.SwapEmbedding):
            view.swap_position.setValue(item.position)
            view.swap_token.setValue(item.token_id)
            view.swap.setChecked(True)
        elif isinstance(item, lib.HeadTemperature):
            view.temper_layer.setValue(item.layer)
            view.temper_head.setValue(item.head)
            view.temper_value.setValue(item.temperature)
            view.temper.setChecked(True)
    view.run()                                    # at once, not after the controls' pause


def apply_view(window, *, text: Optional[str] = None, sentences: Optional[Sequence[str]] = None,
               word: Optional[str] = None, tab: Optional[str] = None, stage: Optional[str] = None,
               layer: Optional[int] = None, head: Optional[int] = None, selected: Optional[int] = None,
               temperature: Optional[float] = None, interventions: Optional[Sequence] = None) -> None:
    session = window.session
    if text is not None and text != session.text:
        session.set_text(text, immediate=True)
    if sentences is not None:
        window.tabs.view("compare").set_sentences(list(sentences), word)
    if layer is not None:
        session.set_layer(layer)
    if head is not None:
        session.set_head(head)
    if stage is not None:
        session.set_stage(stage)
    if temperature is not None:
        session.set_temperature(temperature)
    if interventions is not None and (interventions or session.interventions):
        set_interventions(window, interventions)
    if selected is not None:
        if not hasattr(window, "pending_selection"):
            window.pending_selection = PendingSelection(session)
        window.pending_selection.set(session.text, selected)
    if tab is not None:
        window.tabs.show_tab(tab)
