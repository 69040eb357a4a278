"""The translation window's Two Models page: the window's translator (A) against a second
encoder–decoder (B, the reference), on the window's source and target. A thin adapter over
state/seq2seq_diff.py's TwoTranslators: the window hands it each new trace of A; the page draws
what it computed (core/analysis/seq2seq_diff.py) — where the drift enters the encoder's layers,
the decoder's layers with their cross-attention, the cross-attention's divergence per layer and
head, and each token's drift along either stack — and a click on a map's cell opens that stage,
layer and head in the stage list."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QLabel, QPushButton, QSplitter, QTabWidget,
                               QVBoxLayout, QWidget)

from ...core.analysis import model_diff, seq2seq_diff
from ...core.analysis.labels import token_labels
from ...core.model import stages
from ...core.model.seq2seq_stages import CROSS_ATTENTION
from ...state.seq2seq_diff import TwoTranslators
from ..interventions.difference_map import percent
from ..model_diff.figures import SHORT, TokenDrift
from ..plots import Heatmap

HINT = ("Open a second encoder–decoder of the same shape and tokenizer (a fine-tuned translator against "
        "its base, a quantized or noised copy) with Compare With Translator…: both run on this source "
        "and target, and every layer of both stacks is compared.")
MODEL_FOLDERS = "config.json of a translator folder (config.json);;All files (*)"


class StackDriftMap(Heatmap):
    """One stack: rows are the stages compared (in the order the block runs them), columns its
    layers (these models have a few: the stages' names read on the rows); a cell is
    ‖A − B‖ / ‖B‖ of that array over every token (core/analysis/model_diff.py's stage map)."""

    def __init__(self, title: str, parent: Optional[QWidget] = None) -> None:
        super().__init__(title, "layer", "stage", signed=False, value_label="‖A − B‖ / ‖B‖",
                         row_names="stage", col_names="layer", click=None, parent=parent)
        self.diff: Optional[model_diff.ModelDiff] = None
        self.stages: tuple[str, ...] = ()
        self.titles: dict = model_diff.STAGE_TITLES
        self.note: Optional[Callable[[int], str]] = None       # (layer) -> what its sub-blocks add

    def show_diff(self, diff: model_diff.ModelDiff, stages=model_diff.STAGES, titles=None) -> None:
        self.diff, self.titles = diff, titles or model_diff.STAGE_TITLES
        self.stages = tuple(name for name in stages if any(name in layer.stages for layer in diff.layers))
        values = diff.stage_map(self.stages).T                  # [stage, layer]
        finite = values[np.isfinite(values)]
        top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        self.set_data(np.where(np.isinf(values), top, values), [SHORT[name] for name in self.stages],
                      [f"layer {layer.layer}" for layer in diff.layers], levels=(0.0, top), describe=self._describe)
        self.set_cell_labels([[percent(v) for v in row] for row in values], 400, width=6)

    def stage_at(self, row: int) -> str:
        return self.stages[row] if 0 <= row < len(self.stages) else ""

    def _describe(self, row: int, col: int) -> str:
        layer, name = self.diff.layers[col], self.stages[row]
        drift = layer.stages.get(name)
        if drift is None:
            return f"layer {layer.layer}: this model records no {self.titles[name]}"
        text = (f"layer {layer.layer}, {self.titles[name]}: ‖A − B‖ / ‖B‖ = {drift.relative:.4g}, mean cosine "
                f"{drift.cosine:.6f}\n")
        return text + (self.note(col) if self.note is not None else
                       f"the block adds {layer.added_attention:+.4g} in attention, {layer.added_feed_forward:+.4g} "
                       "in the feed-forward") + "; click: this stage at this layer"


class CrossDivergence(Heatmap):
    """Rows: decoder layers; columns: heads; a cell: the mean Jensen–Shannon divergence of B's
    cross-attention rows over the source from A's."""

    def __init__(self, parent: Optional[QWidget] = None) -> None:
        super().__init__("Cross-attention: Jensen–Shannon divergence of B's rows from A's (nats)", "head",
                         "decoder layer", signed=False, value_label="JS divergence (nats)",
                         row_names="layer", col_names="head", click=None, parent=parent)
        self.diff: Optional[seq2seq_diff.Seq2SeqDiff] = None

    def show_diff(self, diff: seq2seq_diff.Seq2SeqDiff) -> None:
        self.diff = diff
        values = np.stack([cross.divergence for cross in diff.cross])
        top = float(values.max()) if values.size and values.max() > 0 else 1.0
        self.set_data(values, [f"layer {c.layer}" for c in diff.cross], [f"head {h}" for h in range(values.shape[1])],
                      levels=(0.0, top), describe=self._describe)
        self.set_cell_labels([[f"{v:.2g}" for v in row] for row in values], 300, width=6)

    def _describe(self, row: int, col: int) -> str:
        cross = self.diff.cross[row]
        return (f"decoder layer {cross.layer}, head {col}: B's cross-attention rows diverge from A's by "
                f"{cross.divergence[col]:.4g} nats on average (log 2 = 0.693 at most); the layer's "
                f"cross-attention adds {cross.added:+.4g} to the stream's ‖A − B‖ / ‖B‖; click: this head's "
                "cross-attention")


class TwoTranslatorsPage(QWidget):
    def __init__(self, state: TwoTranslators, open_cell: Callable, show_difference: Callable[[bool], None],
                 parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.state = state
        self.open_cell = open_cell                # (section, stage key, layer, head) -> None
        self.show_difference = show_difference    # the window's "A − B" switch
        self.model = self.trace = None            # A and its trace, as the window shows them
        self._build()

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 2)
        self.models_label = QLabel()
        self.models_label.setWordWrap(True)
        self.models_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.models_label)
        row = QHBoxLayout()
        self.open_button = QPushButton("Compare With Translator…")
        self.open_button.clicked.connect(self.open_dialog)
        self.stages_button = QPushButton("Show A − B in the Stages")
        self.stages_button.setToolTip("Every stage view of either stack, and the cross-attention, shows "
                                      "A minus B (the window's A − B switch)")
        self.stages_button.clicked.connect(lambda: self.show_difference(True))
        self.close_button = QPushButton("Close B")
        self.close_button.clicked.connect(self.state.close_other)
        for button in (self.open_button, self.stages_button, self.close_button):
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)
        self.readout = QLabel(HINT)
        self.readout.setWordWrap(True)
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.readout)
        self.encoder_map = StackDriftMap("Encoder: ‖A − B‖ / ‖B‖ over every token")
        self.decoder_map = StackDriftMap("Decoder (×: its cross-attention)")
        self.decoder_map.note = self._decoder_note
        self.cross = CrossDivergence()
        self.target_drift, self.source_drift = TokenDrift(), TokenDrift()
        # one tab for both stacks' maps side by side (the decoder's with the cross-attention's
        # columns), one for the cross-attention per head, one per stack for each token's drift
        maps = QSplitter(Qt.Orientation.Horizontal)
        maps.addWidget(self.encoder_map)
        maps.addWidget(self.decoder_map)
        maps.setStretchFactor(0, 1)
        maps.setStretchFactor(1, 1)
        self.details = QTabWidget()
        self.details.addTab(maps, "Both stacks")
        self.details.addTab(self.cross, "Cross-attention per head")
        self.details.addTab(self.target_drift, "Per target token")
        self.details.addTab(self.source_drift, "Per source token")
        layout.addWidget(self.details, stretch=1)
        self.encoder_map.cellClicked.connect(self._encoder_cell)
        self.decoder_map.cellClicked.connect(self._decoder_cell)
        self.cross.cellClicked.connect(lambda r, c: self.open_cell("Decoder", CROSS_ATTENTION.key, r, c))
        self.state.events.changed.connect(self._on_changed)
        self.state.events.busy.connect(self._on_busy)
        self._on_changed()

    # -- requests ------------------------------------------------------------------------------
    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Compare with a translator (pick its folder's config.json)",
                                              "", MODEL_FOLDERS)
        if path:
            self.open_other(path)

    def open_other(self, path: str) -> None:
        if self.model is None:
            self.readout.setText("Open a translator first: the second one is compared against it.")
            return
        self.state.open_other(path, self.model, self.trace)

    def set_trace(self, model, trace) -> None:
        """The window's translator and trace (the labels read them)."""
        self.model, self.trace = model, trace

    def _encoder_cell(self, row: int, col: int) -> None:
        self._cell("Encoder", self.encoder_map.stage_at(row), col)

    def _decoder_cell(self, row: int, col: int) -> None:
        self._cell("Decoder", self.decoder_map.stage_at(row), col)

    def _cell(self, section: str, name: str, layer: int) -> None:
        """A map's cell: that stage of that stack, at that layer."""
        if name.startswith("cross_"):
            self.open_cell(section, CROSS_ATTENTION.key, layer, None)
            return
        stage = stages.stage_computing(name or "layer_out")
        self.open_cell(section, stage.key if stage is not None else "layer_output", layer, None)

    # -- drawing -------------------------------------------------------------------------------
    def _on_changed(self) -> None:
        state = self.state
        a = self.model.name if self.model is not None else "no translator"
        self.models_label.setText(f"<b>A</b> (this window's): {a}   ·   <b>B</b> (the reference): "
                                  f"{state.path_b or '—'}")
        self.close_button.setEnabled(state.model_b is not None)
        self.stages_button.setEnabled(state.result is not None)
        result = state.result
        self.details.setVisible(result is not None)      # no figure of an older diff beside a refusal
        if result is None:
            self.readout.setText(state.message or (HINT if state.model_b is None else ""))
            return
        diff = result.diff
        self.readout.setText(self.readout_text(diff, result.trace_a))
        self.encoder_map.show_diff(diff.encoder)
        self.decoder_map.show_diff(diff.decoder, seq2seq_diff.DECODER_STAGES,
                                   {**model_diff.STAGE_TITLES, **seq2seq_diff.CROSS_TITLES})
        self.cross.show_diff(diff)
        model = self.model
        self.target_drift.show_diff(diff.decoder, token_labels(result.trace_a.decoder, model.target_tokenizer),
                                    result.trace_a.decoder.n_seq - 1)
        self.source_drift.show_diff(diff.encoder, token_labels(result.trace_a.encoder, model.tokenizer), 0)

    def readout_text(self, diff: seq2seq_diff.Seq2SeqDiff, trace_a) -> str:
        parts = []
        largest = diff.largest_addition()
        if largest is not None:
            stack, layer, part, rise = largest
            parts.append(f"Most drift enters at the {stack}'s layer {layer} {part} (the stream's ‖A − B‖ / ‖B‖ "
                         f"rises {rise:+.3g}).")
        encoder, decoder = diff.encoder.hidden[-1], diff.decoder.hidden[-1]
        parts.append(f"Encoder output: ‖A − B‖ / ‖B‖ = {encoder.relative:.4g}; decoder's last hidden state: "
                     f"{decoder.relative:.4g}.")
        output = diff.decoder.output
        if output is not None:
            parts.append(f"Output: KL(p_B ‖ p_A) = {output.kl:.4g} nats on average, top-1 agrees at "
                         f"{100 * output.top1_agree:.0f} % of {trace_a.decoder.n_seq} target positions.")
        return " ".join(parts)

    def _decoder_note(self, column: int) -> str:
        diff = self.state.result.diff
        layer, cross = diff.decoder.layers[column], diff.cross[column]
        return (f"the block adds {layer.added_attention:+.4g} in self-attention, {cross.added:+.4g} in "
                f"cross-attention, {layer.added_feed_forward:+.4g} in the feed-forward")

    def _on_busy(self, busy: bool, what: str) -> None:
        if busy:
            self.readout.setText(what)

    def markdown(self) -> str:
        """The explanation beside the page."""
        return ("## Two models\n\nThis window's translator (**A**) against a second encoder–decoder "
                "(**B**, the reference) on the same source and target ids: every layer of both stacks "
                "compared from the two exact traces. A cell is ‖A − B‖ / ‖B‖ of that array over every "
                "token; the decoder's × rows are its cross-attention (q from the decoder, k and v "
                "from each model's own encoder output). The other tabs: how differently each head of "
                "the cross-attention aligns the target with the source (Jensen–Shannon divergence of "
                "its rows), and each token's drift along either stack.\n\nClick a cell to open that stage; "
                "**A − B** (top right) makes every stage view show the difference, and Alt-click on a "
                "difference explains it in both models.")

    def figures(self) -> list:
        return [self.encoder_map, self.decoder_map, self.cross, self.target_drift, self.source_drift]

    def shutdown(self) -> None:
        self.state.events.changed.disconnect(self._on_changed)
        self.state.events.busy.disconnect(self._on_busy)
