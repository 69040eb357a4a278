"""A stage view's "A − B" mode (the part of ui/stages/base.py's StageView that draws it): while
the session shows A − B, the view's own figures give way to the stage's difference
(ui/model_diff/stage_panel.py), computed in a worker as a layer's detail is, or a line saying
what it waits for or why there is nothing to subtract. The view's bookkeeping stays the view's:
`_drawn` records B's trace beside A's, so a new B, a new text or the mode's end redraws."""
from __future__ import annotations

import weakref
from typing import Optional

from ..plots.figure import Figure
from ..workers import Task
from .stage_panel import DifferenceCache, DifferencePanel

# A − B at a stage whose difference has nothing to show
NOTHING_TO_SUBTRACT = {
    "logit_lens": "A − B: the logit lens reads each layer's output through the output head; the "
                  "difference of those outputs is in Layer output, the output's in Prediction.",
    "router": "A − B: layer {layer} has no router (a dense feed-forward); Feed-forward shows its difference.",
    "": "A − B: this stage computes no array both models record here."}
READOUT = "Hover a plot for exact values; click a token to select it."


def is_one_d(trace, name: str, index: tuple) -> bool:
    """Is trace array `name` (per layer when the index is longer than its rows and columns) 1-D,
    drawn by the A − B panel as one column?"""
    if name in trace.arrays:
        return trace.arrays[name].ndim == 1
    return len(index) == 3 and name in trace.layer_names() and trace.layer(name, index[0]).ndim == 1


class CellExplainer:
    """A difference figure's Alt-click, to its mode (held weakly: no cycle through the figure)."""

    def __init__(self, mode: "DifferenceMode", key: str) -> None:
        self._mode, self.key = weakref.ref(mode), key

    def __call__(self, row: int, col: int) -> None:
        mode = self._mode()
        if mode is not None:
            mode.explain_cell(self.key, row, col)


class DifferenceMode:
    def __init__(self, view) -> None:
        # the view owns its mode: a weak reference back, so a closed view is freed without
        # the cycle collector (tests/ui/test_gc_stress.py)
        self._view = weakref.ref(view)
        self.cache = DifferenceCache()
        self.panel: Optional[DifferencePanel] = None
        self._pending: Optional[tuple] = None          # (A's trace ref, B's trace ref, key) computing

    @property
    def view(self):
        return self._view()

    def key(self) -> tuple:
        view = self.view
        return (view.stage_key, view.session.layer if view.stage.per_layer else 0,
                view.session.head if view.stage.per_head else 0)

    def hide(self) -> None:
        if self.panel is not None and self.panel.isVisible():
            self.panel.setVisible(False)

    def ensure(self, trace, against) -> None:
        """Draw the stage's A − B in place of the view's figures (or say what it waits for)."""
        view = self.view
        session = view.session
        previous, view._drawn = view._drawn, None
        if (previous is not None and against is not None and previous[0]() is trace and previous[3] is not None
                and previous[3]() is against and previous[1] == view.data_key() and self.panel is not None
                and self.panel.isVisible()):
            self.panel.select(session.selected_token)                 # only the selection moved
            view._drawn = previous[:2] + (session.selected_token,) + previous[3:]
            return
        view.cache_note.setVisible(False)
        view.intervention_note.setVisible(False)
        if against is None:
            view._hide_figures("Tracing the compared model (B) on this text…")
            return
        key = self.key()
        shown = self.cache.get(trace, against, key)
        if shown is None and session.inline_work:
            self.cache.compute(trace, against, key)
            shown = self.cache.get(trace, against, key)
        if shown is None:
            self._start(trace, against, key)
            return
        view._problem = None
        drawn = (weakref.ref(trace), view.data_key(), session.selected_token, weakref.ref(against))
        if not shown.items:             # nothing of its own to subtract here: said in one line
            view._hide_figures(NOTHING_TO_SUBTRACT.get(view.stage_key, NOTHING_TO_SUBTRACT[""]).format(
                layer=session.layer))
        else:
            self._draw(shown, against)
        view._drawn = drawn
        view.updated.emit()

    def _start(self, trace, against, key) -> None:
        view = self.view
        failed = view._work.failed
        if failed is not None and failed[0]() is trace:
            view._hide_figures(f"⚠ {failed[1]}")
            return
        pending = self._pending
        if pending is None or pending[0]() is not trace or pending[1]() is not against or pending[2] != key:
            self._pending = (weakref.ref(trace), weakref.ref(against), key)
            failed_for = weakref.ref(trace)
            view.session.workers.start(Task(0, self.cache.compute, trace, against, key),
                                       lambda *_: self._computed(),
                                       lambda _, message, __: self._failed(failed_for, message))
        where = f"layer {key[1]}" if view.stage.per_layer else "this stage"
        view._hide_figures(f"Comparing {where} of A and B…")

    def _computed(self) -> None:
        self._pending = None
        view = self.view
        if view is not None:
            view._work.done()           # (redraws if the view is still there)

    def _failed(self, trace, message: str) -> None:
        self._pending = None
        view = self.view
        if view is not None:
            view._work.fail(trace, message)

    def _draw(self, shown, against) -> None:
        view = self.view
        view.placeholder.setVisible(False)
        view.plot_area.setVisible(False)
        if self.panel is None:
            self.panel = DifferencePanel(self._connect_figure)
            view._outer.insertWidget(view._outer.indexOf(view.plot_area) + 1, self.panel, stretch=1)
        model = view.session.model
        self.panel.show_difference(shown, view.labels, model.tokenizer,
                                   (model.name, view.session.against_name or "B"), view.session.selected_token)
        if view.session.inline_work:        # no frame scheduler to make the colour bars in turns
            for _, figure in self.panel.figures():
                figure.finish()
        self.panel.setVisible(True)
        view.readout.setText(READOUT)

    def _connect_figure(self, name: str, figure: Figure) -> None:
        view = self.view
        figure.tokenClicked.connect(view.session.select_token)
        figure.hovered.connect(view.readout.setText)
        # Alt-click: the provenance of the difference (the panel explains it in both models)
        figure.cellClicked.connect(CellExplainer(self, name[len("difference_"):]))
        if view.on_new_figure is not None:
            view.on_new_figure(view, name, figure)       # its export menu: the figure as shown

    def explain_cell(self, key: str, row: int, col: int) -> None:
        view = self.view
        if view is None or self.panel is None or view.trace is None:
            return
        name, index = self.panel.address(key, row, col)
        if name is None:                      # nothing either model computed: why, in one line
            view.readout.setText(f"A − B: {index[0]}.")
            return
        if is_one_d(view.trace, name, index):
            index = self.panel.one_d(name, index)
        view.session.request_provenance(name, index)

    def markdown(self) -> str:
        """The explanation while the view shows A − B."""
        name = self.view.session.against_name or "the compared model"
        return (f"The figures show **A − B**: this stage's arrays in the open model (A) minus the same "
                f"arrays in {name} (B), both traced on this text — blue where A is lower, red where "
                "it is higher. Each title gives ‖A − B‖ / ‖B‖ over every token and the largest "
                "|A − B|, as the Interventions tab measures an intervention against the clean pass. "
                "Where a difference means nothing (token ids, the experts a router chose, the most "
                "likely next tokens) A and B are shown side by side. Turn off *Show A − B* for "
                "this stage's own figures and explanation.")
