"""The Stepper tab: the text box and token strip on top, the stage list, the stage's view and its
explanation side by side. It keeps one view per stage (`views`), built ahead of the user: the
next stage's while the user reads this one (then painted off screen one figure per turn), and
every stage's one step per turn while nothing happens. All three go through the session's frame
scheduler (state/frames.py): what is on screen first (the explanation, the shown view's
figures: NOW), then the next stage (AHEAD), then the idle builds (IDLE). The window around it
steps the session (toolbar, Go menu) and shows the stage's title; `stageShown` tells it a stage
is on screen."""
from __future__ import annotations

import html
from typing import Optional

import numpy as np
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QLabel, QLineEdit, QListWidget, QListWidgetItem,
                               QSplitter, QStackedWidget, QVBoxLayout, QWidget)
from shiboken6 import isValid

from ...core.model import stages
from ...core.model.errors import ModelError
from ...core.analysis.unknown_words import unknown_words
from ...state.frames import AHEAD, IDLE, NOW, PAUSE, run_generator
from ..explain import explanations
from ..explain.explanation_panel import ExplanationPanel
from ..export.menu import install_plot_menus
from .intervened_toggle import InterventionBanner
from ..model_diff.difference_toggle import DifferenceBanner
from ..session import Session
from ..stages import StageView, create_view
from ..timers import one_shot
from .token_strip import TokenStripArea

PREBUILD_DELAY_MS = 400
# the frame scheduler's tasks (a new one replaces the stale one of its key)
EXPLAIN, BUILD_AHEAD, IDLE_BUILD = "stepper explanation", "stepper build ahead", "stepper idle build"


class StepperView(QWidget):
    stageShown = Signal()          # the session's stage is the one on screen
    vocabularyWanted = Signal()    # the unknown-words note's link: show the model's vocabulary

    def __init__(self, session: Session, show_intervened: QAction,
                 parent: Optional[QWidget] = None, show_difference: Optional[QAction] = None) -> None:
        super().__init__(parent)
        self.session = session
        self.frames = session.frames
        self.views: dict[str, StageView] = {}
        self._build(show_intervened, show_difference)
        # building a view takes 0.1-0.3 s (pyqtgraph items): the next stage's is built while
        # the user reads this one, so stepping forward only shows it
        # (the reader's pause, then an AHEAD task: the view built, its figures painted off
        # screen one per turn)
        self._prebuild = one_shot(self, PREBUILD_DELAY_MS, self._start_ahead)
        # while nothing happens, build the stages' views one step per turn (an IDLE task; a
        # view's plots take 20–100 ms to make), so a stage's first visit only draws
        self._unfinished: list[StageView] = []  # built while idle, figures not yet finished
        self._connect_session()
        self._mark_stages()

    # -- building -----------------------------------------------------------------------
    def _build(self, show_intervened: QAction, show_difference: Optional[QAction] = None) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 0)
        layout.setSpacing(4)
        self.text_box = QLineEdit(self.session.text)
        self.text_box.setPlaceholderText("Type a sentence; the model re-runs as you type")
        self.text_box.setClearButtonEnabled(True)
        font = self.text_box.font()
        font.setPointSize(font.pointSize() + 2)
        self.text_box.setFont(font)
        self.text_box.textEdited.connect(self.session.set_text)
        self.text_box.setToolTip("Type a sentence. Esc returns the arrow keys to stepping; "
                                 "Alt+← / Alt+→ step from here too.")
        self.text_box.installEventFilter(self)
        layout.addWidget(self.text_box)
        self.text_problem = QLabel()
        self.text_problem.setStyleSheet("color: #b00020;")
        self.text_problem.setVisible(False)
        layout.addWidget(self.text_problem)
        # words outside the vocabulary: said, with a link to the vocabulary (Help menu too)
        self.unknown_note = QLabel()
        self.unknown_note.setObjectName("unknown_note")
        self.unknown_note.setWordWrap(True)
        self.unknown_note.setStyleSheet("color: #b00020;")
        self.unknown_note.setVisible(False)
        self.unknown_note.linkActivated.connect(lambda _link: self.vocabularyWanted.emit())
        layout.addWidget(self.unknown_note)
        self.tokens = TokenStripArea()
        self.tokens.strip.tokenClicked.connect(self.session.select_token)
        layout.addWidget(self.tokens)
        # the Stepper shows the clean or the intervened pass: one switch, the banner says which
        self.intervention_banner = InterventionBanner(self.session, show_intervened)
        layout.addWidget(self.intervention_banner)
        # ... or A − B, a second model against this one (ui/model_diff/difference_toggle.py)
        self.difference_banner = None
        if show_difference is not None:
            self.difference_banner = DifferenceBanner(self.session, show_difference)
            layout.addWidget(self.difference_banner)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.stage_list = QListWidget()
        self.stage_list.setMinimumWidth(190)
        self.stage_list.setMaximumWidth(280)
        # at 1366 px with a dock open the list is 190 px: a long title wraps onto a second
        # line rather than being cut ("9  Output projection and resid")
        self.stage_list.setWordWrap(True)
        self.stage_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        for stage in stages.STAGES:
            item = QListWidgetItem(f"{stage.number:>2}  {stage.title}")
            item.setData(Qt.ItemDataRole.UserRole, stage.key)
            self.stage_list.addItem(item)
        self.stage_list.currentItemChanged.connect(self._stage_clicked)
        self.stack = QStackedWidget()
        self.stack.setFocusPolicy(Qt.FocusPolicy.StrongFocus)   # holds the focus for ← / →
        self.explanation = ExplanationPanel()
        self.explanation.setOpenExternalLinks(False)
        self.explanation.setMinimumWidth(240)
        self.splitter.addWidget(self.stage_list)
        self.splitter.addWidget(self.stack)
        self.splitter.addWidget(self.explanation)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([220, 880, 320])
        layout.addWidget(self.splitter, stretch=1)

    def _connect_session(self) -> None:
        s = self.session
        s.modelChanged.connect(self._mark_stages)
        s.traceChanged.connect(self._on_trace)
        s.headChanged.connect(self._explain_again)
        s.selectionChanged.connect(self.tokens.strip.set_selected)
        s.selectionChanged.connect(self._explain_again)
        s.stageChanged.connect(self.show_stage)
        s.temperatureChanged.connect(self._explain_again)
        s.computeFailed.connect(self._on_compute_failed)
        s.textChanged.connect(self._on_text_changed)

    def eventFilter(self, watched, event) -> bool:
        # Esc in the text box gives the arrow keys back to stepping
        if (watched is self.text_box and event.type() == QEvent.Type.KeyPress
                and event.key() == Qt.Key.Key_Escape):
            self.focus_stage()
            return True
        return super().eventFilter(watched, event)

    def focus_text(self) -> None:
        self.text_box.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.text_box.selectAll()

    def focus_stage(self) -> None:
        """The stage area takes the keyboard, so ← / → step (the text box keeps them for the cursor)."""
        self.stack.setFocus(Qt.FocusReason.OtherFocusReason)

    # -- reacting to the session ------------------------------------------------------------
    def _mark_stages(self) -> None:
        """The stages this model has are enabled; the others say why not."""
        model = self.session.model
        config = model.config if model else None
        for row, stage in enumerate(stages.STAGES):
            item = self.stage_list.item(row)
            reason = stage.unavailable_because(config)
            # numbered for this model (a mixture of experts adds the Router); a stage only some
            # architectures have (the Router) is left out of the others' list
            item.setText(f"{stage.number_for(config):>2}  {stage.title}")
            item.setHidden(bool(reason) and stage.needs_experts)
            flags = item.flags()
            item.setFlags(flags & ~Qt.ItemFlag.ItemIsEnabled if reason else flags | Qt.ItemFlag.ItemIsEnabled)
            item.setToolTip(f"this model {reason}" if reason
                            else f"computed by transformer_stepper.{stage.function}")

    def _on_trace(self) -> None:
        self.frames.add(IDLE_BUILD, self._build_one_view, IDLE, rest=True)
        trace = self.session.trace
        self.text_problem.setVisible(False)
        if trace is None:
            self.tokens.strip.set_tokens([], [], [], -1)
            self.update_explanation()
            return
        unknown = unknown_words(trace, self.session.model.tokenizer.unknown_id
                                if self.session.model is not None else None)
        self.tokens.strip.set_tokens(self.session.token_labels(), trace.input_ids,
                                     trace.special_tokens_mask, self.session.selected_token,
                                     trace.generated, unknown.mask)
        self._say_unknown(unknown)
        self.tokens.fit_height()
        if trace.truncated:
            self._say_truncated(trace)
        if not np.isfinite(trace.residual["layer_out"][-1]).all():   # NaN/Inf reach the end
            self.text_problem.setText("⚠ the forward pass produced inf or NaN (are the weights "
                                      "corrupt?): non-finite cells are hatched and left out of "
                                      "ranges, maps and choices")
            self.text_problem.setVisible(True)
        self._explain_soon()                 # (the view draws the new trace itself, being shown)

    def _say_unknown(self, unknown) -> None:
        if not unknown.count:
            self.unknown_note.setVisible(False)
            return
        words = ", ".join(dict.fromkeys(unknown.words))
        n = unknown.count
        self.unknown_note.setText(
            f"⚠ {n} word{'s' if n > 1 else ''} of this text {'are' if n > 1 else 'is'} not in the model's "
            f"vocabulary and became the unknown token (marked red): {html.escape(words)}. The model "
            f"sees one and the same vector for all of them. <a href='vocabulary'>See the vocabulary</a>")
        self.unknown_note.setVisible(True)

    def _say_truncated(self, trace) -> None:
        """A text longer than the model's context: said in the warning line, with how much went."""
        from ...core.analysis.labels import kept_characters

        kept, total = kept_characters(trace), len(trace.text)
        self.text_problem.setText(
            f"⚠ The text is longer than the model reads ({trace.config.n_ctx} tokens): only its first "
            f"{kept:,} of {total:,} characters are used; the last {total - kept:,} characters "
            f"(from “{trace.text[kept:kept + 24].strip()}…”) were dropped.")
        self.text_problem.setVisible(True)

    def _on_text_changed(self, text: str) -> None:
        if self.text_box.text() != text:
            self.text_box.setText(text)

    def _on_compute_failed(self, message: str) -> None:
        self.text_problem.setText(f"⚠ {message}")
        self.text_problem.setVisible(True)

    def _stage_clicked(self, item: Optional[QListWidgetItem], _previous=None) -> None:
        if item is not None:
            self.session.set_stage(item.data(Qt.ItemDataRole.UserRole))

    def show_stage(self, key: str) -> None:
        view = self.view(key, in_steps=True)     # (not built yet: it builds over turns, shown)
        self.stack.setCurrentWidget(view)
        row = [s.key for s in stages.STAGES].index(key)
        self.stage_list.blockSignals(True)
        self.stage_list.setCurrentRow(row)
        self.stage_list.blockSignals(False)
        self.stageShown.emit()
        self._prebuild.start()

    # -- the views, built ahead -----------------------------------------------------------------
    def _start_ahead(self) -> None:
        self.frames.add(BUILD_AHEAD, run_generator(self._build_next_view()), AHEAD)

    def _build_next_view(self):
        """While the user reads, get the next stage ready: built, drawn for the current state
        (when it is in the same layer), laid out, then painted off screen one figure per turn
        (a view's figures take 30-60 ms at 512 tokens): showing it then only copies what they
        painted. A generator: one piece per turn of the frame scheduler."""
        session = self.session
        if session.model is None or session.trace is None or session.busy:
            return
        target = stages.step(session.stage_key, session.layer, +1, session.model.config)
        if target is None or (target[0] in self.views and target[1] != session.layer):
            return
        view = self.view(target[0], in_steps=True)
        while isValid(view) and view.building:      # a figure a turn, not all at once (the last
            view.build_step()                       # step too: not with a colour bar)
            yield True
        while isValid(view) and not view.isVisible() and view.finish_one():     # its colour bars
            yield True
        if not isValid(view) or view.isVisible():        # (shown meanwhile: it draws itself)
            return
        if target[1] == session.layer and not view.is_current():
            view.ensure_current()
        view.resize(self.stack.size())
        view.layout().activate()                # the figures' sizes on screen
        ahead = [figure for _, figure in view.figures() if not figure.isHidden()]
        for figure in ahead:
            yield True                          # (the turn after the build, then one each)
            if isValid(figure) and not figure.isVisible():     # (shown meanwhile: painted)
                figure.grab()

    def _build_one_view(self) -> object:
        """Build the model's stages' views one step per turn (a view built in steps: a few
        figures a turn), the nearest after the current stage first, then their colour bars one
        per turn (skeletons only: a hidden view draws when shown); the next view after a pause.
        (An IDLE task: it waits while the user or a worker is active.)"""
        session = self.session
        if session.model is None:
            return False
        if self._unfinished:                    # the view built last: its figures, then its
            view = self._unfinished[-1]         # colour bars, one per turn (a view may have six)
            if isValid(view) and view.building:
                view.build_step()               # (its last step too is a turn of its own: it
                return True                     # made a figure and a colour bar in one)
            if isValid(view) and view.finish_one():
                return True
            self._unfinished.pop()
        keys = [s.key for s in session.available_stages()]
        here = keys.index(session.stage_key) if session.stage_key in keys else 0
        missing = [key for key in keys[here:] + keys[:here] if key not in self.views]
        if missing:
            self._unfinished.append(self.view(missing[0], in_steps=True))
            return PAUSE
        return False

    def views_built(self) -> bool:
        """Every stage of the model has its view (built while idle, or visited), finished."""
        session = self.session
        return (session.model is not None and not self._unfinished
                and all(s.key in self.views for s in session.available_stages()))

    def settled(self) -> bool:
        """The shown stage is drawn for the current state, every figure of it painted, and the
        explanation says its numbers (nothing left for a later turn)."""
        view = self.views.get(self.session.stage_key)      # (asking builds nothing)
        return view is not None and view.painted() and not self.frames.pending(EXPLAIN)

    def view(self, key: str, in_steps: bool = False) -> StageView:
        """The stage's view, created the first time it is needed, built whole (`in_steps`: the
        idle builder builds it in steps; asked for meanwhile, the rest is built now)."""
        if key not in self.views:
            view = create_view(key, self.session, self.stack, in_steps=in_steps)
            install_plot_menus(view)             # right-click: Export as PNG / SVG
            view.updated.connect(self._view_updated)
            self.stack.addWidget(view)
            self.views[key] = view
        elif not in_steps:
            self.views[key].build_all()
        return self.views[key]

    def current_view(self) -> StageView:
        return self.view(self.session.stage_key)

    def _view_updated(self) -> None:
        if self.sender() is self.views.get(self.session.stage_key):
            self._explain_soon()

    def _explain_soon(self) -> None:
        """A new trace or a redrawn view: the explanation's numbers follow in a turn of their
        own, before the figures' repaints (what is read first)."""
        self.frames.add(EXPLAIN, self._explain_piece, NOW, first=True)

    def _explain_piece(self) -> bool:
        self.update_explanation()
        return False

    # -- the explanation --------------------------------------------------------------------------
    def _explain_again(self, _value=None) -> None:
        self.update_explanation()

    def update_explanation(self) -> None:
        self.frames.cancel(EXPLAIN)
        key = self.session.stage_key
        view = self.views.get(key)
        stage = stages.stage(key)
        number = stage.number_for(self.session.model.config if self.session.model else None)
        if view is None or self.session.trace is None:
            self.explanation.show_markdown(f"## {number}. {stage.title}\n\n*No trace yet.*")
            return
        view.ensure_current()
        waiting = view.waiting_for()
        if waiting:      # a layer computed in a worker: its numbers are quoted once it is drawn
            self.explanation.show_markdown(f"## {number}. {stage.title}\n\n*{waiting}*")
            return
        if view.showing_difference:      # A − B: what the figures are, not A's numbers
            self.explanation.show_markdown(f"## {number}. {stage.title} · A − B\n\n{view.difference_markdown()}")
            return
        try:
            values, flags = view.explanation_values()
        except ModelError as exc:   # the numbers it quotes need weights that are gone
            self.explanation.show_markdown(f"## {number}. {stage.title}\n\n⚠ {exc}")
            return
        where = (f" · layer {self.session.layer}, head {self.session.head}" if stage.per_head else
                 f" · layer {self.session.layer}" if stage.per_layer else "")
        body = explanations.render_stage(key, values, flags)
        self.explanation.show_markdown(f"## {number}. {stage.title}{where}\n\n{body}")

    def stop_building(self) -> None:
        """Window close: the builders stop (the idle builder goes on by itself: left running,
        it builds views after they are closed)."""
        self._prebuild.stop()
        for key in (EXPLAIN, BUILD_AHEAD, IDLE_BUILD):
            self.frames.cancel(key)
        self._unfinished.clear()

    def close_views(self) -> None:
        for view in self.views.values():
            view.close()
