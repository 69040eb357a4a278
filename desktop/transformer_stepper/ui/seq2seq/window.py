"""The encoder–decoder stepper window: a source box, the target so far (editable: teacher
forcing, every position's prediction shown), Next Token / Translate, the stage list in an
Encoder and a Decoder section (Cross-attention between the decoder's self-attention and its
feed-forward), layer and head. Each one-stack stage is its ordinary view (ui/stages/) over that
stack's Trace; selection is linked: a target or source token chosen anywhere is chosen in every
view of its side and in the alignment. The model, the trace and the requests (opening, tracing,
stepping, a layer's detail: in a worker, the latest wins) are the TranslationState's
(state/seq2seq.py); the window shows them, and the views read traces whose layer is ready."""
from __future__ import annotations

from typing import Optional

from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QLineEdit, QMainWindow, QPushButton,
                               QSpinBox, QSplitter, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)
from PySide6.QtCore import QSize, Qt, QTimer

from ...core.analysis.labels import token_labels
from ...core.model.seq2seq_interventions import describe_all
from ...core.model.seq2seq_stages import SECTIONS, seq2seq_stages
from ...io.resources import builtin_translator_dir
from ..explain.explanation_panel import ExplanationPanel
from ..reflow import CurrentPageStack, scrolling
from ..screen_fit import fit_new_window, fit_window
from ..stages import create_view
from ..view_state import FixedSampling, ViewState
from .cross_view import CrossAttentionView
from .compare_page import EncoderComparePage
from .interventions_panel import InterventionsPanel
from .provenance import ProvenanceRelay, install as install_provenance
from .explain import cross_attention_markdown, stage_markdown, velan_markdown
from .state import TranslationState
from .pair import TWO_MODELS, ComparesTranslators
from .two_models import TwoTranslatorsPage
from ...state import seq2seq_work as work
from ...state.seq2seq_diff import ShowsAgainst, TwoTranslators
from ...state.seq2seq import summary

VELAN = ("Velan", "velan")          # the stage list's key of the page on Velan

class _Steer(FixedSampling):
    """The decoder's prediction view: a click on a bar appends that token (as in the main
    window's generation)."""

    def __init__(self, append, parent=None) -> None:
        super().__init__(parent=parent)
        self._append = append

    def append(self, token_id: int) -> None:
        self._append(token_id)


class StackState(ShowsAgainst, ViewState):
    """One stack's view state, able to show A − B (a second translator opened against this one)."""


class DecoderState(ShowsAgainst, ViewState):
    """The decoder's view state; `steer(token id)` appends a chosen token."""

    def __init__(self, *args, steer=None, **kwargs) -> None:
        self._steer = steer
        super().__init__(*args, **kwargs)

    def _new_generation(self):
        return _Steer(self._steer, parent=self)


class TranslationWindow(ComparesTranslators, QMainWindow):
    def __init__(self, source: str = "", parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Transformer Stepper — encoder–decoder")
        self.translation = TranslationState(source, parent=self)
        self.workers = self.translation.workers
        self.states: dict[str, ViewState] = {}
        self.views: dict[tuple[str, str], QWidget] = {}
        self.layer = self.head = 0
        self._status_base = ""
        self.two = TwoTranslators(self.workers)          # a second translator against this one
        self.two_page: Optional[TwoTranslatorsPage] = None      # made when first shown
        self.cross_difference: Optional[QWidget] = None      # the Cross-attention in A − B (ui/seq2seq/pair.py)
        self._handed = None                              # the trace of A the comparison follows
        self._build(source)
        self.two.events.changed.connect(self._two_changed)
        self.two.events.ready.connect(self._two_ready)
        self.provenance = ProvenanceRelay(self)          # Alt-click a value: its arithmetic
        self.provenance_dock, self.provenance_panel = install_provenance(self, self.provenance)
        self.cross_view.explainRequested.connect(self._explain_decoder)
        self._fitted = False                         # fitted to its screen once, when first shown
        fit_new_window(self, QSize(1200, 800))       # room for the alignment and a stage's plots

    # -- the state, read ----------------------------------------------------------------------
    model = property(lambda self: self.translation.model)
    trace = property(lambda self: self.translation.trace)
    path = property(lambda self: self.translation.path)
    traced_source = property(lambda self: self.translation.traced_source)     # of the trace shown
    target_generated = property(lambda self: self.translation.target_generated)

    @property
    def translate_when_open(self) -> bool:
        """A walk's step: translate once the model is open."""
        return self.translation.translate_when_open

    @translate_when_open.setter
    def translate_when_open(self, value: bool) -> None:
        self.translation.translate_when_open = value

    # -- widgets ----------------------------------------------------------------------------
    def _build(self, source: str) -> None:
        central = QWidget()
        outer = QVBoxLayout(central)
        row = QHBoxLayout()
        self.source_box, self.target_box = QLineEdit(source), QLineEdit()
        self.source_box.setPlaceholderText("source sentence")
        self.target_box.setPlaceholderText("target so far (type to teacher-force)")
        self.next_button, self.translate_button = QPushButton("Next Token"), QPushButton("Translate")
        self.layer_box, self.head_box = QSpinBox(), QSpinBox()
        self.difference_box = QCheckBox("A − B")
        self.difference_box.setEnabled(False)
        self.difference_box.setToolTip("Open a second translator against this one first (the Two Models "
                                       "page); then every stage view can show A − B")
        self.difference_box.toggled.connect(self._difference_toggled)
        for label, widget, stretch in (("Source", self.source_box, 3), ("Target", self.target_box, 3),
                                       ("", self.next_button, 0), ("", self.translate_button, 0),
                                       ("Layer", self.layer_box, 0), ("Head", self.head_box, 0),
                                       ("", self.difference_box, 0)):
            if label:
                row.addWidget(QLabel(label))
            row.addWidget(widget, stretch)
        outer.addLayout(row)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        outer.addWidget(self.status)
        splitter = QSplitter()
        self.stage_list = QTreeWidget()
        self.stage_list.setHeaderHidden(True)
        self.stage_list.setMaximumWidth(260)
        self.pages = CurrentPageStack()      # the shown page's minimum, not the widest page's
        self.cross_view = CrossAttentionView()
        self.pages.addWidget(self.cross_view)
        self.interventions_panel = InterventionsPanel(self, self.open_cell)
        self.pages.addWidget(self.interventions_panel)
        self.compare_page: Optional[EncoderComparePage] = None   # made when first shown
        self.velan_page = ExplanationPanel()
        self.pages.addWidget(self.velan_page)
        self.explanation = ExplanationPanel()
        self.explanation.setMinimumWidth(240)
        splitter.addWidget(self.stage_list)
        splitter.addWidget(scrolling(self.pages))      # keeps its plots legible on a laptop
        splitter.addWidget(self.explanation)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([200, 760, 330])
        outer.addWidget(splitter, 1)
        self.setCentralWidget(central)
        self.source_box.textEdited.connect(self.translation.edit_source)
        self.target_box.textEdited.connect(self.translation.edit_target)
        self.translation.targetChanged.connect(self.target_box.setText)
        self.translation.traced.connect(self._traced)
        self.translation.failed.connect(self._failed)
        self.next_button.clicked.connect(self.next_token)
        self.translate_button.clicked.connect(self.translate)
        self.layer_box.valueChanged.connect(self._layer_changed)
        self.head_box.valueChanged.connect(self._head_changed)
        self.stage_list.currentItemChanged.connect(self._show_stage)
        self.cross_view.targetSelected.connect(lambda i: self._select("Decoder", i))
        self.cross_view.sourceSelected.connect(lambda i: self._select("Encoder", i))

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._fitted:                         # its frame is known once it is mapped
            self._fitted = True
            QTimer.singleShot(0, self, lambda: fit_window(self))

    # -- work: the state's, with the boxes' texts ------------------------------------------------
    def _texts(self) -> TranslationState:
        """The state, told the boxes' texts (code may have set them without an edit)."""
        self.translation.set_texts(self.source_box.text(), self.target_box.text())
        return self.translation

    def open_model(self, path: Optional[str]) -> None:
        self.status.setText(f"opening {path} …")
        self._texts().open_model(path)

    def retrace(self) -> None:
        self._texts().retrace()

    def retrace_then_translate(self) -> None:
        """Trace the source afresh (the target emptied), then translate it step by step."""
        self._texts().retrace_then_translate()

    def next_token(self) -> None:
        self.translation.next_token()

    def append_token(self, token_id: int) -> None:
        self.translation.append_token(token_id)

    def translate(self) -> None:
        """To the end of the sentence: of the source in the box, traced afresh if it changed."""
        self._texts().translate()

    def _layer_changed(self, layer: int) -> None:
        self.layer = layer
        self._follow_in_compare()
        self.two.set_layer(layer)
        self.translation.set_layer(layer)

    def _head_changed(self, head: int) -> None:
        self.head = head
        for state in self.states.values():
            state.set_head(head)
        self._refresh_cross()
        self._follow_in_compare()

    def _follow_in_compare(self) -> None:
        if self.compare_page is not None and self.model is not None:
            self.compare_page.set_model(self.model, self.layer, self.head)

    def _traced(self, new_model: bool, target_text) -> None:
        if target_text is not None:
            self.target_box.setText(target_text)
        self._status_base = summary(self.model, self.trace)
        if self.trace is not self._handed:           # a new trace (not a layer prepared): B follows it
            self._handed = self.trace
            self.two.set_trace(self.model, self.trace)
        self._take_trace(new_model)
        self._show_status()

    def _failed(self, message: str) -> None:
        self.status.setText(f"error: {message}")

    # -- views ---------------------------------------------------------------------------------
    def shown_trace(self):
        """What the stage views draw: the intervened pass while the Interventions page says so
        (and it is of the current trace), else the trace."""
        intervened = self.interventions_panel.shown_in_stages()
        return intervened if intervened is not None else self.trace

    def shown_changed(self) -> None:
        """The Interventions page switched the stages between the clean and intervened pass."""
        if self.interventions_panel.shown_in_stages() is not None and self.difference_box.isChecked():
            self.difference_box.setChecked(False)            # one mode at a time
        if self.trace is not None:
            self._take_trace(False)
            self._show_status()

    def _show_status(self) -> None:
        shown = self.interventions_panel.shown_in_stages()
        note = "" if shown is None else f"The stages show the intervened pass {describe_all(shown.interventions)} · "
        if shown is None and self.difference_box.isChecked():
            note = (f"The stages show A − B: {self.model.name} minus {self.two.name_b}"
                    f"{'' if self._pair_current() else ' (tracing B on this text…)'} · ")
        self.status.setText(note + self._status_base)

    def _take_trace(self, new_model: bool) -> None:
        encoder, decoder = work.stack_models(self.model)
        old = self.states
        shown = self.shown_trace()
        self.states = {
            "Encoder": StackState(encoder, shown.encoder, layer=self.layer, head=self.head,
                                  parent=self),
            "Decoder": DecoderState(decoder, shown.decoder, layer=self.layer, head=self.head,
                                    selected=shown.decoder.n_seq - 1, parent=self,
                                    steer=self.append_token)}
        self.states["Encoder"].selectionChanged.connect(self._source_selected)
        self.states["Decoder"].selectionChanged.connect(self._target_selected)
        self._hand_against()
        self.provenance.set_states(self.states)
        current = self.stage_list.currentItem()
        key = current.data(0, Qt.ItemDataRole.UserRole) if current is not None else None
        for view in self.views.values():
            self.pages.removeWidget(view)
            view.deleteLater()
        self.views.clear()
        for state in old.values():
            state.deleteLater()
        if new_model:
            self._fill_stage_list()
        else:
            self._show_key(key)
        self.interventions_panel.trace_changed()

    def _fill_stage_list(self) -> None:
        config = self.model.config
        self.layer_box.setRange(0, min(config.encoder.n_layer, config.decoder.n_layer) - 1)
        self.head_box.setRange(0, min(config.encoder.n_head, config.decoder.n_head) - 1)
        self.stage_list.blockSignals(True)
        self.stage_list.clear()
        sections = {name: QTreeWidgetItem([name]) for name in SECTIONS}
        for item in sections.values():
            self.stage_list.addTopLevelItem(item)
            item.setExpanded(True)
        cross = None
        for section, stage in seq2seq_stages(config):
            child = QTreeWidgetItem([f"{stage.number}. {stage.title}"])
            child.setData(0, Qt.ItemDataRole.UserRole, (section, stage.key))
            sections[section].addChild(child)
            cross = child if stage.key == "cross_attention" else cross
        for title, key in (("Interventions", "interventions"), ("Compare (encoder)", "compare"),
                           ("Two models", TWO_MODELS[1])):
            extra = QTreeWidgetItem([title])
            extra.setData(0, Qt.ItemDataRole.UserRole, ("", key))
            self.stage_list.addTopLevelItem(extra)
        if self.is_builtin():
            page = QTreeWidgetItem(["Velan: the translator's language"])
            page.setData(0, Qt.ItemDataRole.UserRole, VELAN)
            self.stage_list.addTopLevelItem(page)
        self.stage_list.blockSignals(False)
        self.stage_list.setCurrentItem(cross)

    def _show_key(self, key) -> None:
        item = self._item(key)
        if item is not None:
            self._show_stage(item)

    def _item(self, key):
        for i in range(self.stage_list.topLevelItemCount()):
            section = self.stage_list.topLevelItem(i)
            if section.data(0, Qt.ItemDataRole.UserRole) == key:
                return section
            for j in range(section.childCount()):
                if section.child(j).data(0, Qt.ItemDataRole.UserRole) == key:
                    return section.child(j)
        return None

    def open_cell(self, section: str, key: str, layer: Optional[int], head: Optional[int]) -> None:
        """A click in a difference map: that stage of that stack, at that layer and head."""
        if layer is not None:
            self.layer_box.setValue(layer)
        if head is not None:
            self.head_box.setValue(head)
        item = self._item((section, key))
        if item is not None:
            self.stage_list.setCurrentItem(item)

    def _show_stage(self, item, _previous=None) -> None:
        key = item.data(0, Qt.ItemDataRole.UserRole) if item is not None else None
        if key is None or self.trace is None:
            return
        section, stage_key = key
        if key == VELAN:
            self.velan_page.show_markdown(velan_markdown(self.model.config.encoder.n_vocab))
            self.explanation.show_markdown("## Velan\n\nThe page on the left gives Velan's rules and "
                                           "words, from the generator that wrote the translator's "
                                           "training pairs: check a translation against them.")
            self.pages.setCurrentWidget(self.velan_page)
            return
        if stage_key == "interventions":
            self.pages.setCurrentWidget(self.interventions_panel)
            return
        if stage_key == "compare":
            self.pages.setCurrentWidget(self._compare())
            return
        if key == TWO_MODELS:
            page = self._two_models()
            self.pages.setCurrentWidget(page)
            self.explanation.show_markdown(page.markdown())
            return
        if stage_key == "cross_attention":
            self._refresh_cross()
            self.pages.setCurrentWidget(self._cross_page())
            self.explanation.show_markdown(self._cross_markdown(self.trace))
            return
        view = self.views.get(key)
        if view is None:
            view = self.views[key] = create_view(stage_key, self.states[section])
            view.updated.connect(self._explain)
            self.pages.addWidget(view)
        self.pages.setCurrentWidget(view)
        self._explain()

    def is_builtin(self) -> bool:
        """The built-in translator is open (its language, Velan, has a page)."""
        from pathlib import Path

        try:
            return self.path is not None and Path(self.path).resolve() == builtin_translator_dir().resolve()
        except OSError:
            return False

    def _explain(self) -> None:
        """The shown one-stack view's explanation, under its part of the encoder–decoder."""
        current = self.stage_list.currentItem()
        key = current.data(0, Qt.ItemDataRole.UserRole) if current is not None else None
        view = self.views.get(key) if key is not None else None
        if view is None or self.trace is None or self.pages.currentWidget() is not view:
            return
        section, stage_key = key
        stage = next(s for sec, s in seq2seq_stages(self.model.config) if sec == section and s.key == stage_key)
        self.explanation.show_markdown(stage_markdown(section, stage, view, self.trace))

    def _compare(self) -> EncoderComparePage:
        if self.compare_page is None:
            self.compare_page = EncoderComparePage()
            self.pages.addWidget(self.compare_page)
        self.compare_page.set_model(self.model, self.layer, self.head)
        return self.compare_page

    def _refresh_cross(self) -> None:
        shown = self.shown_trace() if self.trace is not None else None
        if shown is None or not shown.decoder.is_ready(self.layer):
            return
        labels = {side: token_labels(state.trace, state.model.tokenizer) for side, state in self.states.items()}
        if self.difference_box.isChecked():
            self._refresh_cross_difference(labels)
            if self.pages.currentWidget() is self.cross_view:
                self.pages.setCurrentWidget(self._cross_page())
            if self.pages.currentWidget() is self.cross_difference:
                self.explanation.show_markdown(self._cross_markdown(shown))
            return
        if self.pages.currentWidget() is self.cross_difference:
            self.pages.setCurrentWidget(self.cross_view)
        self.cross_view.show_trace(shown, self.layer, self.head, labels["Encoder"], labels["Decoder"])
        if self.pages.currentWidget() is self.cross_view:
            self.explanation.show_markdown(cross_attention_markdown(shown, self.layer, self.head))

    def _select(self, section: str, index: int) -> None:
        state = self.states.get(section)
        if state is not None:
            state.select_token(index)
        self.cross_view.select(index if section == "Decoder" else None,
                               index if section == "Encoder" else None)

    def _explain_decoder(self, name: str, index) -> None:
        self.provenance.request("Decoder", name, index)

    def _source_selected(self, index: int) -> None:
        self.cross_view.select(None, index)

    def _target_selected(self, index: int) -> None:
        self.cross_view.select(index, None)

    def closeEvent(self, event) -> None:
        self.provenance_panel.close()
        if self.two_page is not None:
            self.two_page.shutdown()
        self.two.close_other()
        if self.compare_page is not None:
            self.compare_page.shutdown()
        self.translation.shutdown()
        super().closeEvent(event)
