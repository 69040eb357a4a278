"""What every stage view shares: figures in a grid, a readout line for hover values, and the
bookkeeping that redraws only what changed, and only when the view is on screen (or asked for
its plots, e.g. by an export). After new data the figures repaint one per event-loop turn
(ui/stages/turns.py: tasks of the session's frame scheduler), so the window answers between
them."""
from __future__ import annotations

import weakref
from typing import Callable, Iterator, Optional

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from ...core.model import stages
from ...core.model.errors import ModelError
from ...core.trace.trace import Trace
from ...io.gguf.weights import is_gguf
from ..connections import Connections
from ..plots.figure import Figure
from ..reflow import ReflowGrid
from ..view_state import ViewState
from .explanation_values import common_values
from .notes import cache_note, intervention_note, note_label
from .turns import StageTurns
from .work import WorkOnce
from ..model_diff.stage_mode import DifferenceMode


READOUT_HINT = ("Hover a plot for exact values; click a token to select it; "
                "Alt-click (or Ctrl-click) a value to see where it comes from.")


class StageView(QWidget):
    """Subclasses set `stage_key`, build their figures in `build()` (once), and fill them in
    `update_data()` (trace, layer, head changed) and `update_selection()` (selected token).
    A `build()` that yields between figures is a build in steps: the window builds such a view
    while idle one step per event-loop turn (a figure takes 6-10 ms to make); anything that
    draws or exports the view first builds the rest."""

    stage_key = ""
    # figures made while the view is shown building stay hidden until it draws (a view whose
    # drawing depends on its figures' size on screen says False: the logit lens's table)
    hidden_while_building = True
    # the core parameter whose GGUF blocks the "Dequantization…" button shows ("h.{layer}.attn.q.w")
    dequantized_weight = ""
    updated = Signal()               # redrawn: the explanation may have new numbers

    def __init__(self, session: ViewState, parent: Optional[QWidget] = None,
                 in_steps: bool = False) -> None:
        super().__init__(parent)
        self.session = session
        self.stage = stages.stage(self.stage_key)
        self._figures: list[tuple[str, Figure]] = []
        self._extras: list[QWidget] = []         # non-plot widgets, hidden with the figures
        # (weak reference to the trace, data key, selection) last drawn: what was drawn, never
        # the trace itself, so an old trace is freed as soon as the session lets it go
        self._drawn: Optional[tuple] = None
        self._problem: Optional[str] = None      # why the view could not be drawn
        self._work = WorkOnce(self)                      # drawn from a worker's result
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 2)
        outer.setSpacing(4)
        self.controls = QVBoxLayout()
        outer.addLayout(self.controls)
        # attention stages after a pass that reused cached positions: which keys and values
        # came from the cache
        self.cache_note = note_label("cache_note", "#2d6f2d", "#e3f4e1")
        outer.addWidget(self.cache_note)
        # the intervened pass shown: what the interventions change at this stage, layer and head
        self.intervention_note = note_label("intervention_note", "#5c3d00", "#ffe9b3")
        outer.addWidget(self.intervention_note)
        self.placeholder = QLabel("Open a model and type a sentence to see this stage.")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setVisible(False)
        outer.addWidget(self.placeholder)
        # the plots: a grid that becomes one scrolling column when the window is narrow
        self.plot_area = QWidget()
        self.grid = ReflowGrid(self.plot_area)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(6)
        # no scroll area of its own: the tab scrolls (ui/tabs.py); a QScrollArea around the
        # figures here made the garbage collector crash after an offscreen export's views
        # were deleted (tests/ui/test_export_cli.py then test_export_render.py: a segfault in
        # ui/collector.py)
        outer.addWidget(self.plot_area, stretch=1)
        self._outer = outer
        # the session shows A − B (a second model against this one): this stage's difference
        # in place of the figures (ui/model_diff/stage_mode.py), its panel made on first use
        self.difference_mode = DifferenceMode(self)
        self.readout = QLabel(READOUT_HINT)
        self.readout.setObjectName("readout")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setStyleSheet("color: #444;")
        # wrapped, so that neither this hint nor a long hover text makes the window wider than
        # a laptop's screen (a one-line label's minimum width is its whole text)
        self.readout.setWordWrap(True)
        outer.addWidget(self.readout)
        # called with (view, name, figure) for a figure added after this was set (the window
        # gives it its export menu; a view may make a model's own plots when first needed)
        self.on_new_figure = None
        self._connections = Connections()
        self._dequantize: Optional[QWidget] = None     # holds the "Dequantization…" button
        if self.dequantized_weight:                    # a GGUF model's stored blocks of it
            button = QPushButton("Dequantization of these weights…")
            button.setObjectName("dequantize_button")
            button.setToolTip("The stored codes, block scales and formula behind this stage's "
                              "weights (GGUF models)")
            button.clicked.connect(self._request_dequantization)
            self._dequantize = self.add_controls(QWidget())
            row = QHBoxLayout(self._dequantize)
            row.setContentsMargins(0, 0, 0, 0)
            row.addWidget(button)
            row.addStretch(1)
        # the build steps left and the turns the figures repaint in
        self._turns = StageTurns(self, self.build())
        if not in_steps:
            self.build_all()
        self.listen(session.traceChanged, self._on_data)
        self.listen(session.shownTraceChanged, self._on_data)     # clean <-> intervened
        self.listen(session.selectionChanged, self._on_selection)
        if self.stage.per_layer:
            self.listen(session.layerChanged, self._on_data)
        if self.stage.per_head:
            self.listen(session.headChanged, self._on_data)
        self.listen(session.layerReady, self._on_data)
        if session.inline_work:             # an export draws at once; a window when shown
            self.ensure_current()

    def _request_dequantization(self) -> None:
        self.session.request_dequantization(self.dequantized_weight.format(layer=self.session.layer))

    # -- for subclasses -------------------------------------------------------------------
    def build(self) -> Optional[Iterator]:
        raise NotImplementedError

    def build_step(self) -> bool:
        """One more step of a build in steps; False when the view is built."""
        return self._turns.build_step()

    @property
    def building(self) -> bool:
        """Steps of a build in steps are left (the last one may still make a figure)."""
        return self._turns.steps is not None

    def build_all(self) -> None:
        while self.build_step():
            pass

    def update_data(self) -> None:
        raise NotImplementedError

    def update_selection(self) -> None:
        """Only what depends on the selected token (always called after update_data)."""

    def stage_values(self) -> dict:
        """Numbers for this stage's explanation text (answers with the actual values)."""
        return {}

    def stage_flags(self) -> dict:
        """Which of the text's conditional sentences apply (e.g. a token that occurs twice)."""
        return {}

    def required_layers(self) -> list[int]:
        """The layers whose detail this view reads (prepared off the GUI thread first)."""
        return [self.session.layer] if self.stage.per_layer else []

    def prepare_work(self) -> Optional[str]:
        """Start what must be computed before drawing (in a worker: never here on the GUI
        thread) and say what it is; None when everything is ready. The view redraws when the
        work reports (layerReady)."""
        trace = self.trace
        missing = [layer for layer in self.required_layers() if not self.session.layer_ready(layer, trace)]
        for layer in missing:
            self.session.prepare_layer(layer, trace)
        return f"Computing layer {missing[0]}…" if missing else None

    def work_once(self, ready: bool, job, *args, message: str) -> Optional[str]:
        """For prepare_work: what a view draws from beyond layer detail (e.g. the logit lens),
        computed once per trace in a worker (here, in an export's snapshot, which draws at
        once); None when `ready`, else `message` until the worker reports and the view redraws."""
        return self._work.start(ready, job, *args, message=message)

    def listen(self, signal, slot) -> None:
        """Connect to a session signal; close() disconnects (the session outlives views)."""
        self._connections.connect(signal, slot)

    def add_figure(self, name: str, figure: Figure, row: int, col: int,
                   row_span: int = 1, col_span: int = 1, on_click=None, explain=None) -> Figure:
        """Place a figure; a click on it selects a token (or calls `on_click(index)`).
        `explain(row, col)` names the trace value under a cell, (array name, index) or None:
        Alt-click there asks the provenance panel where that value comes from."""
        self._figures.append((name, figure))
        if self.on_new_figure is not None:       # one made after the window set the view up
            self.on_new_figure(self, name, figure)
        self._hidden_until_drawn(figure)
        self.grid.addWidget(figure, row, col, row_span, col_span)
        figure.tokenClicked.connect(on_click or self.session.select_token)
        figure.hovered.connect(self.readout.setText)
        if explain is not None:
            # a bound method, not a lambda holding the view: no reference cycle through the
            # connection; close() drops the figure's explain (which may hold the view)
            figure.explain = explain
            figure.cellClicked.connect(self._explain_cell)
        return figure

    def _explain_cell(self, row: int, col: int) -> None:
        explain = getattr(self.sender(), "explain", None)
        if self.trace is None or explain is None:
            return
        address = explain(row, col)
        if address is not None:
            self.session.request_provenance(*address)

    # addresses of the usual cells, for `explain=` (read at click time: layer, head, selection)
    def cell(self, name: str):
        """(row = token, col = dim) of a per-layer [n_seq, d] array."""
        return lambda r, c: (name, (self.session.layer, r, c))

    def head_cell(self, name: str):
        """(row = token, col = dim) of the selected head's [n_seq, d_head] (or [n_q, n_k]) array."""
        return lambda r, c: (name, (self.session.layer, self.session.head, r, c))

    def query_bar(self, name: str):
        """Bar j of the selected query's row of a [n_head, n_q, n_k] array."""
        return lambda j, _: (name, (self.session.layer, self.session.head, self.selected, j))

    def add_widget(self, widget: QWidget, row: int, col: int, row_span: int = 1,
                   col_span: int = 1) -> QWidget:
        """A widget beside the figures (a table): shown only when there is a trace."""
        self._extras.append(widget)
        self._hidden_until_drawn(widget)
        self.grid.addWidget(widget, row, col, row_span, col_span)
        return widget

    def _hidden_until_drawn(self, widget: QWidget) -> None:
        """A figure made while the view is shown building (its placeholder says so) stays
        hidden until the view draws: shown empty, each one laid the grid out again and painted
        (and so did those before it) in the turn that made it."""
        turns = getattr(self, "_turns", None)        # (none yet while a plain build() runs)
        if turns is not None and turns.draw_after_build and self.hidden_while_building:
            widget.setVisible(False)

    def add_controls(self, widget: QWidget) -> QWidget:
        """A row of controls above the figures (a slider): shown only when there is a trace."""
        self._extras.append(widget)
        self._hidden_until_drawn(widget)
        self.controls.addWidget(widget)
        return widget

    def show_figure(self, name: str, visible: bool) -> None:
        for figure_name, figure in self._figures:
            if figure_name == name:
                figure.setVisible(visible)

    def show_placeholder(self, message: str) -> None:
        """The placeholder, saying `message`, in place of the figures and widgets."""
        self.placeholder.setText(message)
        self.placeholder.setVisible(True)
        for widget in [figure for _, figure in self._figures] + self._extras:
            widget.setVisible(False)

    @property
    def trace(self) -> Optional[Trace]:
        """The trace drawn: the clean one, or the intervened one when the user shows it."""
        return self.session.shown_trace

    @property
    def labels(self) -> list[str]:
        return self.session.token_labels()

    @property
    def selected(self) -> int:
        return self.session.selected_token

    def layer_array(self, name: str) -> np.ndarray:
        return self.trace.layer(name, self.session.layer)

    def head_array(self, name: str) -> np.ndarray:
        return self.trace.head_array(name, self.session.layer, self.session.head)

    # -- the export contract ----------------------------------------------------------------
    def finish_building(self) -> None:
        """Make what the figures defer (see Figure.finish)."""
        while self.finish_one():
            pass

    def finish_one(self) -> bool:
        """Make what one figure defers (a heatmap's colour bar, ~8 ms): the window's idle turns
        after building the view, one figure per turn. False when none was left."""
        for _, figure in self._figures:
            if not figure.finished:
                figure.finish()
                return True
        return False

    def figures(self) -> list[tuple[str, Figure]]:
        """(plot name, Figure widget), as placed (the window gives each its export menu)."""
        return list(self._figures)

    def plots(self) -> list[tuple[str, object]]:
        """(plot name, pyqtgraph GraphicsLayout standing on its own as a figure), up to date
        and whole (colour bars made)."""
        self.build_all()
        self.finish_building()
        self.ensure_current()
        self._turns.figures.draw_waiting()
        return [(name, figure.figure) for name, figure in self._figures if not figure.isHidden()]

    # -- bookkeeping ---------------------------------------------------------------------------
    def data_key(self) -> tuple:
        """What update_data() depends on besides the trace (per-layer views: layer and head)."""
        return ((self.session.layer,) if self.stage.per_layer else ()) + \
            ((self.session.head,) if self.stage.per_head else ())

    def waiting_for(self) -> Optional[str]:
        """What the view waits for before it can be drawn (a layer, the lens, computed in a
        worker), or None: drawn, refused, or nothing to draw. Its numbers, read meanwhile, would
        wait on the GUI thread for the worker (0.2-0.3 s, GPT-2-small-shaped, 1,000 tokens)."""
        if self.trace is None or self.is_current() or self._problem or self.placeholder.isHidden():
            return None
        return self.placeholder.text()

    def is_current(self) -> bool:
        drawn = self._drawn
        return (drawn is not None and not self.session.waiting_for_intervened and drawn[0]() is self.trace and drawn[1] == self.data_key()
                and drawn[2] == self.session.selected_token and drawn[3] == self._against_key())

    def _against_key(self):
        against = self.session.against
        return None if against is None else weakref.ref(against)

    @property
    def showing_difference(self) -> bool:
        """Drawn as A − B (the session shows a second model's difference)."""
        return self._drawn is not None and self._drawn[3] is not None

    def _on_data(self, *_: object) -> None:
        if self.isVisible():
            self.ensure_current()

    _on_selection = _on_data

    def showEvent(self, event) -> None:
        self.ensure_current()
        super().showEvent(event)

    def ensure_current(self) -> None:
        """Redraw what changed since the last drawing; nothing if nothing did. Signals may
        arrive in any order and more than once: the comparison makes repeats free. A view shown
        before the idle builder made it is built first, a figure (or colour bar) per turn."""
        if self._turns.start_if_unbuilt():
            return
        self.build_all()
        self._turns.finish_soon()
        trace = self.trace
        if trace is None:
            self.placeholder.setVisible(True)
            for widget in [figure for _, figure in self._figures] + self._extras:
                widget.setVisible(False)
            self._drawn = None
            return
        if self.is_current():
            return
        if self.session.against is not None or self.session.waiting_for_against:
            self._ensure_difference(trace, self.session.against)
            return
        self._show_own_figures()
        waiting = ("Running the intervened forward pass…" if self.session.waiting_for_intervened
                   else self.prepare_work())
        if waiting:
            self.show_placeholder(waiting)
            return
        self.placeholder.setText("Open a model and type a sentence to see this stage.")
        drawn, key, selected = self._drawn, self.data_key(), self.session.selected_token
        self.placeholder.setVisible(False)
        # a value read by hovering belongs to what was drawn: the bars change now, so it goes
        self.readout.setText(READOUT_HINT)
        try:
            if drawn is None or drawn[3] is not None or drawn[0]() is not trace or drawn[1] != key:
                self._turns.paint_in_turns()
                self.update_data()
            self.update_selection()
        except ModelError as exc:   # a weight the view reads is gone (the file changed on disk)
            self._show_problem(str(exc))
            return
        self._problem = None
        self._drawn = (weakref.ref(trace), key, selected, None)
        self._note_cache(trace)
        note = intervention_note(trace.interventions, self.stage, self.session.layer, self.session.head)
        self.intervention_note.setText(note)
        self.intervention_note.setVisible(bool(note))
        # a figure marks itself unused (e.g. no token types)
        self._show_at_once([(figure, not getattr(figure, "unused", False)) for _, figure in self._figures] +
                           [(widget, widget is not self._dequantize or is_gguf(self.session.model))
                            for widget in self._extras])
        self.updated.emit()

    def _show_at_once(self, visibility: list[tuple[QWidget, bool]]) -> None:
        """Set these widgets' visibility with one layout of the plots: a widget shown in a shown
        parent lays the parent out at once, so a view's six figures shown one after another
        (after the build in turns, or a placeholder) laid the grid out six times, each figure
        resized each time (~0.1 s of the GUI thread on an 8B model's stage)."""
        showing = [widget for widget, visible in visibility if visible and widget.isHidden()]
        batch = len(showing) > 1 and self.plot_area.isVisible()
        if batch:
            self.plot_area.setVisible(False)
        for widget, visible in visibility:
            widget.setVisible(visible)
        if batch:
            self.plot_area.setVisible(True)

    # -- A − B: a second model against this one (ui/model_diff/stage_mode.py) ------------------
    def _ensure_difference(self, trace: Trace, against: Optional[Trace]) -> None:
        self.difference_mode.ensure(trace, against)

    def _hide_figures(self, message: str) -> None:
        self.show_placeholder(message)
        self.difference_mode.hide()

    def _show_own_figures(self) -> None:
        self.difference_mode.hide()
        self.plot_area.setVisible(True)

    def difference_markdown(self) -> str:
        return self.difference_mode.markdown()

    def _show_problem(self, message: str) -> None:
        """The view cannot be drawn: its placeholder says why, in one line; nothing is lost."""
        self.show_placeholder(f"⚠ {message}")
        self._drawn = None
        self._problem = message
        self.difference_mode.hide()

    def draw_in_its_turn(self, figure: Figure, draw: Callable[[], None]) -> None:
        """For update_data: `draw()` fills `figure` in the turn the figure repaints in, not in
        the turn that redraws the view (drawing that takes a while: the feed-forward
        histograms' curves); at once where nothing waits (a hidden view, an export)."""
        if not self._turns.figures.draw_later(figure, lambda: self._draw_if_current(draw)):
            draw()

    def _draw_if_current(self, draw: Callable[[], None]) -> None:
        if self.is_current():
            draw()
        else:                 # the state moved on while the view was hidden: all of it is
            self._drawn = None                   # drawn again when it is shown

    def painted(self) -> bool:
        """Drawn for the current state, and every figure has had its turn to repaint."""
        return self.is_current() and not self._turns.figures.pending()

    def _note_cache(self, trace: Trace) -> None:
        note = cache_note(trace, self.stage.per_head)
        self.cache_note.setVisible(bool(note))
        if note:
            self.cache_note.setText(note)

    def explanation_values(self) -> tuple[dict, dict]:
        """(values, flags) for the stage's explanation template."""
        trace = self.trace
        values, flags = common_values(self.session, trace)
        if trace is not None:
            if self._problem or self._drawn is None:   # not drawn: no numbers to quote
                raise ModelError(self._problem or self.placeholder.text().lstrip("⚠ "))
            values.update(self.stage_values())
            flags.update(self.stage_flags())
        return values, flags

    def close(self) -> bool:
        self._connections.disconnect_all()
        for _, figure in self._figures:   # explain lambdas read the view: break the cycle
            if getattr(figure, "explain", None) is not None:
                figure.explain = None
                figure.cellClicked.disconnect(self._explain_cell)
        self._turns.stop()
        return super().close()
