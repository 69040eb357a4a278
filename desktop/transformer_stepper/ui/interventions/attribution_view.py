"""The Attribution tab: at the selected token, the residual stream after a chosen layer as the sum
of its parts (embedding, each layer's attention and feed-forward output), and — for models with
an LM head — each part's and each head's direct attribution to the predicted token's logit
(core/analysis/attribution.py), also as stacked bars: per layer its heads (through W_O) and its
feed-forward, pushes up stacked above zero and pushes down below. The numbers are
decompose's; this view only arranges them. The layers it reads are computed in workers first,
as the stage views do. With "Show intervened" on it decomposes the intervened pass the stepper
shows (session.shown_trace), says so above the plots, and waits while that pass runs."""
from __future__ import annotations

from typing import Optional

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ...core.analysis.attribution import Decomposition, decompose
from ...core.model.errors import ModelError
from ..connections import Connections
from ..plots import Bars, Heatmap, StackedBars
from ..plots.common import format_value
from ..session import Session
from ...core.analysis.labels import readable


# segment colours: the embedding grey, heads light to dark blue (0 .. H-1), W_O's bias pale, FFN green
EMBEDDING_COLOR, BIAS_COLOR, FFN_COLOR = "#8c8c8c", "#d9d9d9", "#2ca02c"
HEAD_LIGHT, HEAD_DARK = np.array([158, 202, 225]), np.array([8, 48, 107])


def segment_colors(segments) -> list[str]:
    heads = [name for name in segments if name.startswith("head")]
    colors = []
    for name in segments:
        if name.startswith("head"):
            t = heads.index(name) / max(len(heads) - 1, 1)
            r, g, b = (HEAD_LIGHT + t * (HEAD_DARK - HEAD_LIGHT)).astype(int)
            colors.append(f"#{r:02x}{g:02x}{b:02x}")
        else:
            colors.append({"embedding": EMBEDDING_COLOR, "W_O bias": BIAS_COLOR}.get(name, FFN_COLOR))
    return colors


class AttributionView(QWidget):
    def __init__(self, session: Session, settings=None, parent: Optional[QWidget] = None) -> None:
        super().__init__(parent)
        self.session = session
        self.decomposition: Optional[Decomposition] = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)
        controls = QHBoxLayout()
        self.layer_label = QLabel("Residual stream after")
        controls.addWidget(self.layer_label)
        self.layer_box = QComboBox()
        self.layer_box.currentIndexChanged.connect(lambda _: self.refresh())
        controls.addWidget(self.layer_box)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        controls.addWidget(self.summary, stretch=1)
        outer.addLayout(controls)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setObjectName("empty_state")
        self.message.setStyleSheet("color: #444; font-size: 11pt; padding: 24px;")
        grid = QGridLayout()
        outer.addLayout(grid, stretch=1)
        grid.addWidget(self.message, 0, 0, 2, 2)      # in place of the plots, centred
        self.parts = Bars("Direct logit attribution of each part", "part of the stream", "logit",
                          tokens=False, value_name="share of the logit")
        self.heads = Heatmap("Each head's direct attribution", "head", "layer",
                             value_label="logit", row_names="layer", col_names="head", click=None)
        self.sizes = Bars("Size of each part |part|", "part of the stream", "length",
                          tokens=False, value_name="|part|")
        self.layers = StackedBars("Each layer's push on the logit: its heads and its feed-forward",
                                  "heads (through W_O) and FFN stacked; the tick: each bar's sum",
                                  "logit", value_name="share of the logit")
        grid.addWidget(self.layers, 0, 0)
        grid.addWidget(self.heads, 0, 1)
        grid.addWidget(self.parts, 1, 0)
        grid.addWidget(self.sizes, 1, 1)
        for figure in (self.parts, self.heads, self.sizes, self.layers):
            figure.hovered.connect(self.summary.setToolTip)
        self._connections = Connections([
            (session.traceChanged, self._on_trace), (session.modelChanged, self._on_model),
            (session.selectionChanged, self.refresh), (session.layerReady, self.refresh),
            (session.shownTraceChanged, self.refresh)])
        self._on_model()

    def _on_model(self) -> None:
        model = self.session.model
        self.layer_box.blockSignals(True)
        self.layer_box.clear()
        if model is not None:
            n = model.config.n_layer
            self.layer_box.addItems([f"layer {i}" + (" (the last)" if i == n - 1 else "") for i in range(n)])
            self.layer_box.setCurrentIndex(n - 1)
        self.layer_box.blockSignals(False)
        self.refresh()

    def _on_trace(self) -> None:
        if self.session.model is not None and self.layer_box.count() != self.session.model.config.n_layer:
            self._on_model()
        self.refresh()

    def _show(self, message: str, applies: bool = True) -> None:
        """A sentence in place of the plots; `applies` False: no layer to choose either."""
        self.decomposition = None
        self.message.setText(message)
        self.message.setVisible(True)
        self.layer_label.setVisible(applies)
        self.layer_box.setVisible(applies)
        for figure in (self.parts, self.heads, self.sizes, self.layers):
            figure.setVisible(False)
        self.summary.setText("")

    def refresh(self, *_) -> None:
        session, trace = self.session, self.session.shown_trace
        if trace is None or session.model is None:
            self._show("Open a model and type a sentence.")
            return
        if getattr(session, "waiting_for_intervened", False):
            self._show("Running the intervened forward pass for this text… (Show intervened is on: "
                       "this tab decomposes that pass once it is in).")
            return
        config = trace.config
        if config.norm != "pre":
            self._show(f"Attribution does not apply to this model ({config.name or config.family}): it "
                       "is post-LN, so a LayerNorm after every sublayer rescales the residual stream, "
                       "which is then not the sum of the embedding and the sublayers' outputs that "
                       "this tab splits it into.\n\nOpen a pre-LN model (GPT-2, the Llama family, "
                       "the built-in model) to see each layer's and each head's push on the "
                       "predicted token.", applies=False)
            return
        self.layer_label.setVisible(True)
        self.layer_box.setVisible(True)
        layer = max(self.layer_box.currentIndex(), 0)
        missing = [l for l in range(layer + 1) if not session.layer_ready(l, trace)]
        if missing:                        # never compute layer detail on the GUI thread
            for l in missing:
                session.prepare_layer(l, trace)
            self._show(f"Computing layer {missing[0]}…")
            return
        try:
            d = decompose(session.model, trace, session.selected_token, layer)
        except ModelError as error:
            self._show(f"{error}.")
            return
        self.decomposition = d
        self.message.setVisible(False)
        labels = session.token_labels()
        token = labels[d.position]
        sizes = np.linalg.norm(d.parts, axis=1)
        self.sizes.set_title(f"Size of each part of the stream at '{token}' after layer {layer} "
                             f"(they sum to it: largest error {d.residual_error:.1e})")
        self.sizes.set_data(sizes, list(d.names), notes=[f"|part| = {s:.4g}" for s in sizes])
        if d.contributions is None:
            self.parts.setVisible(False)
            self.heads.setVisible(False)
            self.layers.setVisible(False)
            self.sizes.setVisible(True)
            self.summary.setText(f"{self._pass_words(trace)}'{token}': the stream after layer {layer} = "
                                 "embedding + every attention "
                                 "and feed-forward output (no LM head: no logit to attribute).")
            return
        name = readable(session.model.tokenizer.id_to_token(d.token_id))
        self.parts.set_title(f"Each part's push on the logit of '{name}' at '{token}'")
        self.parts.set_data(d.contributions.astype(np.float32), list(d.names),
                            notes=[f"before the norm's scale: {format_value(float(u))}" for u in d.unscaled])
        self.heads.set_title(f"Each head's push on '{name}' (through W_O)")
        self.heads.set_data(d.head_contributions.astype(np.float32),
                            [f"layer {l}" for l in range(layer + 1)],
                            [f"head {h}" for h in range(trace.config.n_head)])
        bars, segments, values = d.layer_bars()
        self.layers.set_title(f"Each layer's push on '{name}' at '{token}' "
                              f"({self._scale_words(config, d.scale)})")
        self.layers.set_data(values, bars, segments, segment_colors(segments))
        for figure in (self.parts, self.heads, self.sizes, self.layers):
            figure.setVisible(True)
        where = "the prediction" if layer == config.n_layer - 1 else "the logit lens at this layer"
        if not config.final_norm:
            scale = "No final norm: each part is dotted with the token's row as it is."
        elif config.norm_kind == "rms":
            scale = f"Each part is scaled by the final RMSNorm's 1/RMS = {d.scale:.4g} (one number for all) and g."
        else:
            scale = (f"Each part is centred and scaled by the final LayerNorm's 1/σ = {d.scale:.4g} "
                     f"(one number for all) and γ; the constant is β·W.")
        self.summary.setText(
            f"{self._pass_words(trace)}<b>'{token}'</b> → <b>'{name}'</b> ({where}): logit {d.logit:.4f} "
            f"= Σ parts {float(d.contributions.sum()):.4f} + constant {d.constant:.4f}. {scale}")

    @staticmethod
    def _pass_words(trace) -> str:
        """Which pass is decomposed, when it is not the clean model's."""
        if not trace.interventions:
            return ""
        from ...core.model.interventions import describe_all
        return f"<b>INTERVENED pass</b> ({describe_all(trace.interventions)}): "

    @staticmethod
    def _scale_words(config, scale: float) -> str:
        if not config.final_norm:
            return "no final norm"
        return f"× final norm's 1/{'RMS' if config.norm_kind == 'rms' else 'σ'} = {scale:.4g}"

    def close(self) -> bool:
        self._connections.disconnect_all()
        return super().close()
