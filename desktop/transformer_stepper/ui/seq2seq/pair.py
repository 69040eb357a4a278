"""The translation window's side of a second translator opened against its own (a part of
TranslationWindow, ui/seq2seq/window.py): the Two models page (ui/seq2seq/two_models.py), the
A − B switch that makes each stack's view state carry B's trace of that stack
(state/seq2seq_diff.py's ShowsAgainst), and the Cross-attention's A − B page
(ui/seq2seq/cross_difference.py). The state of the comparison is the window's `two`
(TwoTranslators, state/seq2seq_diff.py)."""
from __future__ import annotations

from PySide6.QtWidgets import QWidget

from ...state import seq2seq_work as work
from .cross_difference import CrossDifferenceView
from .explain import cross_attention_markdown
from .two_models import TwoTranslatorsPage

TWO_MODELS = ("", "two_models")     # the stage list's key of the Two Models page


class ComparesTranslators:
    def compare_with(self, path: str) -> None:
        """Open `path` against this window's translator (the Two Models page)."""
        self.stage_list.setCurrentItem(self._item(TWO_MODELS))
        self._two_models().open_other(path)

    def _two_models(self) -> TwoTranslatorsPage:
        if self.two_page is None:
            self.two_page = TwoTranslatorsPage(self.two, self.open_cell, self.difference_box.setChecked)
            self.pages.addWidget(self.two_page)
        self.two_page.set_trace(self.model, self.trace)
        return self.two_page

    def _pair_current(self) -> bool:
        """B's latest diff is of the trace the window shows (not of an older text)."""
        result = self.two.result
        return result is not None and result.trace_a is self.trace

    def _hand_against(self) -> None:
        """Each stack's view state told B's trace of that stack (when it is of the trace shown
        and no intervened pass is) and whether the window shows A − B."""
        result, show = self.two.result, self.difference_box.isChecked()
        current = self._pair_current() and self.interventions_panel.shown_in_stages() is None
        stand_ins = work.stack_models(self.two.model_b) if current else (None, None)
        for (side, state), model_b in zip(self.states.items(), stand_ins):
            trace_b = (result.trace_b.encoder if side == "Encoder" else result.trace_b.decoder) if current else None
            state.set_against(trace_b, model_b, (self.model.name, self.two.name_b), show)

    def _difference_toggled(self, on: bool) -> None:
        if on and self.interventions_panel.shown_in_stages() is not None:
            self.interventions_panel.in_stages.setChecked(False)      # one mode at a time
        self._hand_against()
        self._refresh_cross()
        self._show_status()

    def _two_changed(self) -> None:
        available = self.two.result is not None
        self.difference_box.setEnabled(available)
        self.difference_box.setToolTip(
            f"Every stage view shows {self.model.name if self.model else 'A'} minus {self.two.name_b} (B)"
            if available else "Open a second translator against this one first (the Two Models page); "
            "then every stage view can show A − B")
        if self.two.model_b is None or self.two.message:
            self.difference_box.setChecked(False)      # B closed or refused: A alone
        self._hand_against()
        self._refresh_cross()
        if self.trace is not None:
            self._show_status()

    def _two_ready(self, layer: int) -> None:
        for state in self.states.values():
            state.against_ready()
        self._refresh_cross()

    def _cross_page(self) -> QWidget:
        if not self.difference_box.isChecked():
            return self.cross_view
        if self.cross_difference is None:
            self.cross_difference = CrossDifferenceView(self._explain_cross_difference,
                                                        lambda i: self._select("Decoder", i))
            self.pages.addWidget(self.cross_difference)
        return self.cross_difference

    def _refresh_cross_difference(self, labels: dict) -> None:
        page = self._cross_page()
        decoder = self.states.get("Decoder")
        against = decoder.against if decoder is not None else None
        if against is None or not self._pair_current():
            page.caption.setText("A − B: tracing the compared translator (B) on this source and target…")
            page.panel.setVisible(False)
            return
        page.show_difference(self.trace, self.two.result.trace_b, self.layer, self.head, labels["Decoder"],
                             labels["Encoder"], self.model.target_tokenizer, (self.model.name, self.two.name_b),
                             decoder.selected_token)

    def _cross_markdown(self, trace) -> str:
        """The Cross-attention's explanation: its own, or what its A − B figures are."""
        if not self.difference_box.isChecked():
            return cross_attention_markdown(trace, self.layer, self.head)
        return (f"## Decoder: Cross-attention · layer {self.layer}, head {self.head} · A − B\n\n"
                f"The figures show **A − B**: the cross-attention's arrays in {self.model.name} (A) minus "
                f"the same arrays in {self.two.name_b} (B), both run on this source and target — blue "
                "where A is lower, red where it is higher. q comes from each model's decoder stream; k "
                "and v from each model's own encoder output, so their difference carries the encoder's "
                "drift; the weights' columns are the source tokens. Each title gives ‖A − B‖ / ‖B‖ over "
                "every position and the largest |A − B|. Alt-click a difference: its arithmetic in both "
                "models, the summands paired. Turn off **A − B** (top right) for the alignment itself.")

    def _explain_cross_difference(self, name: str, index) -> None:
        self.provenance.request("Decoder", name, index)

