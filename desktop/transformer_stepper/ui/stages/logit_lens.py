"""13. Logit lens (models with an output head): the final norm and the output head applied to
every hidden state, as if the model stopped after that layer. The lens is computed in a worker a
block of positions of one hidden state at a time (core/trace/lens_blocks.py, a cache kept with the
trace and shared with the prediction stage): the blocks of the table's column window and of the
selected position first, the view drawn as soon as those are ready, the rest in pieces after
(cells not computed yet are hatched and say so on hover); scrolling asks for its blocks first."""
from __future__ import annotations

import weakref
from typing import Iterator, Optional

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QScrollBar
from shiboken6 import isValid

from ...core.trace.generate import lens
from ...core.trace.lens_blocks import TraceLens, next_piece, trace_lens
from ...core.analysis import readouts
from ...core.analysis.labels import readable
from ..plots import Heatmap, Lines
from ..plots.common import format_value
from ..plots.lines import Curve
from ..workers import Task
from .base import StageView

TOP = 5
MAX_CELL_TEXTS = 400          # beyond this many cells in view, names only on hover
COLUMN_PIXELS = 46            # narrowest a position's column gets: beyond, a window that scrolls
PIECE = 4                     # (state, block) pairs a worker computes before the view may redraw
NOT_YET = "…"                 # a cell whose block is not computed yet


class LogitLensView(StageView):
    stage_key = "logit_lens"
    # the table's columns follow its width on screen, and the lens is computed for the columns
    # in view first: laid out while it builds, not drawn for a size it does not have yet
    hidden_while_building = False

    def build(self) -> Iterator[None]:      # in steps (StageView)
        self._version = 0                 # bumped when the worker computed something shown
        self._running: Optional[weakref.ref] = None     # the trace a piece is computed for
        self._task: Optional[Task] = None               # ... and the worker's task computing it
        self._lens_failed: Optional[tuple] = None       # (trace ref, message)
        self._token_names: dict[int, str] = {}         # of the tokenizer below
        self._names_of: Optional[weakref.ref] = None
        self._kept: Optional[tuple] = None      # (trace ref, position) last brought into view
        self.table = self.add_figure("lens_top_tokens", Heatmap(
            "Top token at each hidden state", "position", "hidden state", signed=False,
            value_label="probability", row_names="hidden state", col_names="position",
            click="col"), 0, 0)
        self.table.set_column_window(COLUMN_PIXELS)
        # which positions the table shows, when not all fit: dragged, or following the selection
        self.scroll = self.add_widget(QScrollBar(Qt.Orientation.Horizontal), 1, 0)
        self.scroll.setToolTip("Positions shown in the table: scroll for the others")
        self.scroll.valueChanged.connect(self.table.scroll_to)
        self.table.columnWindowChanged.connect(self._on_window)
        yield
        self.curve = self.add_figure("lens_final_token", Lines(
            "The final prediction across layers", "hidden state", "probability"), 0, 1, row_span=2)
        self.updated.connect(self._show_scroll)      # (drawn: every extra widget was shown)
        self.grid.setColumnStretch(0, 3)
        self.grid.setColumnStretch(1, 2)

    # -- the lens, off the GUI thread, what is on screen first ----------------------------------
    def data_key(self) -> tuple:
        # bumped when a piece computed in the worker reaches what the view shows
        return super().data_key() + (self._version,)

    def prepare_work(self) -> Optional[str]:
        trace, model = self.trace, self.session.model
        if self.session.inline_work:             # an export: the whole lens, at once
            lens(model, trace, TOP)
            return None
        failed = self._lens_failed
        if failed is not None and failed[0]() is trace:
            return f"⚠ {failed[1]}"              # said once, not retried for this trace
        cache = trace_lens(model, trace, TOP)
        self._request(cache)
        if cache.ready(range(cache.n_states), self._shown_blocks(cache)):
            return None
        return (f"Computing the logit lens ({model.config.n_layer + 1} hidden states × "
                f"{model.config.n_vocab:,} tokens)…")

    def _shown_blocks(self, cache: TraceLens) -> list[int]:
        """The blocks of the table's column window (of this trace's length) and of the
        selected position, whose column the curve draws."""
        selected = min(max(self.selected, 0), cache.n_seq - 1)
        first, count, total = self.table.column_window()
        if total != cache.n_seq:           # drawn for another text: where this one's will be
            first, count = self.table.window_for(cache.n_seq, selected)
        return list(dict.fromkeys([*cache.blocks_of(first, count), *cache.blocks_of(selected, 1)]))

    def _request(self, cache: TraceLens) -> None:
        """Start the next piece in the worker unless one is running (it asks again when done);
        a piece still running for another text is cancelled at its next block."""
        if self.session.inline_work:
            return
        if self._running is not None:
            if self._running() is not self.trace and self._task is not None:
                self._task.cancel()
            return
        piece = next_piece(cache, self._shown_blocks(cache), PIECE)
        if not piece:
            return
        self._running = trace = weakref.ref(self.trace)     # (a callback keeps no trace alive)
        self._task = Task(0, cache.compute, piece, reports=True)
        self.session.workers.start(self._task, lambda *_: self._piece_done(trace, piece),
                                   lambda _, message, __: self._piece_failed(trace, message),
                                   on_cancelled=lambda _: self._piece_cancelled())

    def _piece_done(self, trace: weakref.ref, piece: list) -> None:
        if not isValid(self):              # the view closed while the worker ran
            return
        self._running = self._task = None
        current, model = self.trace, self.session.model
        if current is None or current is not trace() or model is None:
            self._on_data()                # another text: its lens is asked for when drawn
            return
        cache = trace_lens(model, current, TOP)
        shown = set(self._shown_blocks(cache))
        if cache.complete or any(block in shown for _, block in piece):
            self._version += 1
        self._on_data()
        self._request(cache)               # the rest of this text's lens, hidden or not

    def _piece_cancelled(self) -> None:
        if isValid(self):                  # (cancelled for another text: this one's next)
            self._running = self._task = None
            self._on_data()

    def _piece_failed(self, trace: weakref.ref, message: str) -> None:
        if isValid(self):
            self._running = self._task = None
            self._lens_failed = (trace, message)
            self._on_data()

    # -- drawing --------------------------------------------------------------------------------
    def state_names(self) -> list[str]:
        return ["emb"] + [f"L{i}" for i in range(self.trace.config.n_layer)]

    def update_data(self) -> None:
        trace, model = self.trace, self.session.model
        # what is computed so far (prepare_work made the window's and the selection's blocks)
        self.lens = result = trace_lens(model, trace, TOP).assemble()
        if self._names_of is None or self._names_of() is not model.tokenizer:
            self._token_names, self._names_of = {}, weakref.ref(model.tokenizer)
        states = self.state_names()
        self.names = [[self._token_name(int(t)) for t in row] for row in result.ids[:, :, 0]]
        what = "next token" if trace.config.causal else "token"
        self.table.set_title(f"Top {what} if the model stopped after each layer")
        self.table.set_data(result.probabilities[:, :, 0], states, self.labels, levels=(0.0, 1.0),
                            describe=self._describe)
        self.table.set_cell_labels(self.names, MAX_CELL_TEXTS, width=8)

    def _token_name(self, token: int) -> str:
        if token < 0:
            return NOT_YET
        name = self._token_names.get(token)
        if name is None:
            name = self._token_names[token] = readable(self.session.model.tokenizer.id_to_token(token))
        return name

    def _on_window(self, first: int, count: int, total: int) -> None:
        self.scroll.blockSignals(True)
        self.scroll.setRange(0, max(0, total - count))
        self.scroll.setPageStep(count)
        self.scroll.setValue(first)
        self.scroll.blockSignals(False)
        self._show_scroll()
        trace, model = self.trace, self.session.model
        if trace is not None and model is not None and total == trace.n_seq:
            self._request(trace_lens(model, trace, TOP))     # the new window's blocks first

    def _show_scroll(self) -> None:
        _, count, total = self.table.column_window()
        self.scroll.setVisible(count < total and self.table.isVisible())

    def _describe(self, row: int, col: int) -> str:
        result, model = self.lens, self.session.model
        if result.known is not None and not result.known[row, col]:
            return (f"{self.state_names()[row]}, position {col} '{self.labels[col]}': "
                    "computing the logit lens…")
        ranked = ", ".join(f"'{readable(model.tokenizer.id_to_token(int(t)))}' {format_value(float(p))}"
                           for t, p in zip(result.ids[row, col], result.probabilities[row, col]))
        return f"{self.state_names()[row]}, position {col} '{self.labels[col]}': {ranked}"

    def update_selection(self) -> None:
        i, model = self.selected, self.session.model
        if self.lens.known is not None and not self.lens.known[:, i].all():
            self.update_data()     # the worker computed its block since the table was drawn
        result = self.lens
        self.table.set_highlight(col=i)
        # a new selection or text brings its column into view; more of the lens computed
        # (a redraw of the same) leaves the window where the user scrolled it
        if self._kept is None or self._kept[0]() is not self.trace or self._kept[1] != i:
            self.table.ensure_column_visible(i)
            self._kept = (weakref.ref(self.trace), i)
        final = readable(model.tokenizer.id_to_token(int(result.final_ids[i])))
        first = int(np.argmax(result.ids[:, i, 0] == result.final_ids[i]))
        self.curve.set_title(f"p('{final}') after {i} '{self.labels[i]}', layer by layer")
        self.curve.set_curves([Curve(f"p('{final}')", result.final_probabilities[:, i]),
                               Curve("the state's own top token", result.probabilities[:, i, 0],
                                     color="#999", width=1.2)],
                              x_labels=self.state_names(), y_range=(0.0, 1.0))
        self._values = {"final_token": final, "first_state": self.state_names()[first],
                        "final_probability": f"{float(result.final_probabilities[-1, i]):.3f}",
                        "embedding_probability": f"{float(result.final_probabilities[0, i]):.3f}"}
        known = None if result.known is None else result.known[0]
        echoed, counted = readouts.echo_count(result.ids[0, :, 0], self.trace.input_ids, known)
        self._values.update(emb_echo=echoed, emb_counted=counted)

    def stage_values(self) -> dict:
        # before the lens is drawn (computing), the template's values are not known yet
        return getattr(self, "_values", {"final_token": "…", "first_state": "…", "emb_echo": "…",
                                         "emb_counted": "…", "final_probability": "…",
                                         "embedding_probability": "…"})
