"""The Positions view's figures: the five training curves on one plot, and the E–P interference
figure (per-dimension RMS of e and p beside the cosines of the principal angles between E's and
P's subspaces) for a lab variant or the opened model. Items are created once and fed; the
numbers drawn are those `core.training.positions_lab.interference` returned, never recomputed."""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
import pyqtgraph as pg

from ..plots.bar_item import BarItem
from PySide6.QtGui import QColor, QCursor
from PySide6.QtWidgets import QToolTip

from ...io.positions_lab import LabVariant
from ..plots.axis import LabelAxis
from ..plots.common import LABEL_STYLE, MUTED, cache_on_screen
from ..plots.figure import Figure, adopt_plot_menus
from ..plots.title import TitleLabel

VARIANT_COLOURS = {"sum_sinusoidal": "#1f77b4", "sum_learned": "#ff7f0e", "concat": "#2ca02c",
                   "rotary": "#9467bd", "none": "#7f7f7f"}
PANEL_TITLE_POINTS = 9
LOSS_TICKS = (0.7, 0.8, 0.9, 1, 1.5, 2, 3, 5, 10, 20, 50)
E_COLOUR, P_COLOUR = QColor("#1f77b4"), QColor("#d62728")


def variant_colour(name: str, index: int = 0) -> str:
    return VARIANT_COLOURS.get(name, ("#8c564b", "#e377c2", "#17becf")[index % 3])


class CurvesFigure(Figure):
    """Training loss against step for every variant (seed 0), log scale; held-out loss as dots
    where the run recorded one. The selected variant is drawn thicker."""

    def __init__(self) -> None:
        super().__init__("Training loss of each variant", "step", "loss (nats/token, log scale)")
        self.plot.setLogMode(y=True)
        self.y_axis.setTicks([[(float(np.log10(v)), f"{v:g}") for v in LOSS_TICKS]])
        self.legend = self.plot.addLegend(offset=(-6, 6), labelTextSize="9pt")
        self.legend.setBrush(pg.mkBrush(255, 255, 255, 210))
        self.train_items: dict[str, pg.PlotDataItem] = {}
        self.heldout_items: dict[str, pg.PlotDataItem] = {}
        self.curves: dict[str, dict[str, np.ndarray]] = {}
        self.selected: Optional[str] = None

    def draw(self, variants: Mapping[str, LabVariant], selected: Optional[str] = None) -> None:
        self.legend.clear()
        for item in list(self.train_items.values()) + list(self.heldout_items.values()):
            self.plot.removeItem(item)
        self.train_items, self.heldout_items = {}, {}
        self.curves = {name: v.curve for name, v in variants.items()}
        any_heldout = False
        for index, (name, variant) in enumerate(variants.items()):
            colour = variant_colour(name, index)
            curve = variant.curve
            train = np.isfinite(curve["train_loss"])
            item = pg.PlotDataItem(curve["step"][train], curve["train_loss"][train], antialias=True)
            cache_on_screen(item.curve)
            self.plot.addItem(item)
            self.train_items[name] = item
            self.legend.addItem(item, name)
            heldout = np.isfinite(curve["heldout_loss"])
            if heldout.any():
                any_heldout = True
                dots = pg.PlotDataItem(curve["step"][heldout], curve["heldout_loss"][heldout],
                                       pen=None, symbol="o", symbolSize=5, symbolPen=None,
                                       symbolBrush=pg.mkBrush(colour))
                self.plot.addItem(dots)
                self.heldout_items[name] = dots
        seeds = sorted({v.seed for v in variants.values()})
        self.set_title(f"Training loss, seed {', '.join(map(str, seeds))}"
                       + (" (dots: held-out)" if any_heldout else " (held-out not recorded)"))
        self.select(selected)
        self.plot.enableAutoRange()

    def select(self, selected: Optional[str]) -> None:
        self.selected = selected
        for index, (name, item) in enumerate(self.train_items.items()):
            width = 3.2 if name == selected else 1.4
            item.setPen(pg.mkPen(variant_colour(name, index), width=width))
            item.setZValue(2 if name == selected else 1)

    def hover_at(self, x: float, y: float) -> Optional[str]:
        best = None
        for name, curve in self.curves.items():
            steps, losses = curve["step"], curve["train_loss"]
            if not len(steps):
                continue
            i = int(np.argmin(np.abs(steps - x)))
            if not np.isfinite(losses[i]):
                continue
            distance = abs(np.log10(losses[i]) - y)          # y is log10(loss) on this axis
            text = f"{name}, step {int(steps[i])}: training loss {losses[i]:.4f}"
            held = curve["heldout_loss"][i]
            if np.isfinite(held):
                text += f", held-out {held:.4f}"
            if best is None or distance < best[0]:
                best = (distance, text)
        return best[1] if best is not None else None


class InterferenceFigure(Figure):
    """Left: per-dimension RMS of e (over the tokens) and of p (over the positions): where p is
    as large as e, the sum can disturb e. Right: cosines of the principal angles between the
    span of E (centred) and the span of P (their top directions): 1 = a shared direction."""

    def __init__(self, title: str = "E–P interference") -> None:
        super().__init__(title, "dimension", "RMS")
        self.base_title = title
        self.rms_e = self.plot.plot([], [], pen=pg.mkPen(E_COLOUR, width=1.8), name="e (token rows)")
        self.rms_p = self.plot.plot([], [], pen=pg.mkPen(P_COLOUR, width=1.8), name="p (positions)")
        # one entry a row: two side by side were cut ("p (positio") in a laptop's narrow panel
        legend = self.plot.addLegend(offset=(6, 4), labelTextSize="9pt", colCount=1)
        legend.setBrush(pg.mkBrush(255, 255, 255, 210))
        legend.addItem(self.rms_e, "e (tokens)")
        legend.addItem(self.rms_p, "p (positions)")
        # each panel under a title of its own that elides rather than widening the figure
        self.ci.removeItem(self.plot)
        self.panel_titles = (TitleLabel("", PANEL_TITLE_POINTS, "#444"), TitleLabel("", PANEL_TITLE_POINTS, "#444"))
        self.ci.addItem(self.panel_titles[0], row=1, col=0)
        self.ci.addItem(self.panel_titles[1], row=1, col=1)
        self.ci.addItem(self.plot, row=2, col=0)
        self.angles = self.ci.addPlot(row=2, col=1, axisItems={"bottom": LabelAxis("bottom"),
                                                                "left": LabelAxis("left")})
        adopt_plot_menus(self.angles, self)
        self.angles.hideButtons()
        self.angles.setLabel("bottom", "principal angle k", **LABEL_STYLE)
        self.angles.setLabel("left", "cos θₖ", **LABEL_STYLE)
        self.angles.setYRange(0, 1.05, padding=0)
        self.cosines = BarItem(x=[], height=[], width=0.7, brush=pg.mkBrush("#6a51a3"), pen=None)
        self.angles.addItem(self.cosines)
        self.note = pg.TextItem("", color=MUTED, anchor=(0.5, 0.5))
        self.note.setPos(0.5, 0.5)
        self.angles.addItem(self.note)
        self.angles.getViewBox().setMouseEnabled(False, False)
        self.ci.layout.setColumnStretchFactor(0, 1)
        self.ci.layout.setColumnStretchFactor(1, 1)
        self.shown: Optional[dict] = None
        self.offset_p = 0                 # concat: p lives in the dimensions after e's

    def draw(self, label: str, interference: Optional[dict], why_none: str = "") -> None:
        """`interference` as positions_lab.interference returned it (None: the model adds no
        position vector, `why_none` says why)."""
        self.shown = interference
        if interference is None:
            self.set_title(f"{label}: {why_none}")
            self._panel_titles("RMS per dimension", "E's and P's subspaces")
            for curve in (self.rms_e, self.rms_p):
                curve.setData([], [])
            self.cosines.setOpts(x=[], height=[])
            self._show_note("no position vector:\nnothing to measure")
            return
        rms_e, rms_p = np.asarray(interference["rms_e"]), np.asarray(interference["rms_p"])
        concat = interference.get("p_rank") is None
        self.offset_p = len(rms_e) if concat else 0
        self.rms_e.setData(np.arange(len(rms_e)), rms_e)
        self.rms_p.setData(np.arange(len(rms_p)) + self.offset_p, rms_p)
        cosines = np.asarray(interference["principal_angle_cosines"], dtype=np.float64)
        self.cosines.setOpts(x=np.arange(len(cosines)), height=cosines)
        self.angles.setXRange(-0.6, max(len(cosines), 1) - 0.4, padding=0)
        self.angles.setYRange(0, 1.05, padding=0)
        top = float(max(rms_e.max(initial=0), rms_p.max(initial=0))) or 1.0
        self.plot.setXRange(-0.5, len(rms_e) + (len(rms_p) if concat else 0) - 0.5, padding=0.01)
        self.plot.setYRange(0, 1.7 * top, padding=0)        # room for the legend above the data
        if concat:
            self._show_note("disjoint dimensions:\nno shared direction")
            self.set_title(f"{label}: e in dimensions 0–{len(rms_e) - 1}, p in "
                           f"{len(rms_e)}–{len(rms_e) + len(rms_p) - 1}: no overlap by construction")
            self._panel_titles("RMS per dimension", "E's and P's subspaces")
        else:
            self._show_note("")
            self.set_title(f"{label}: E–P interference")
            self._panel_titles(f"RMS per dimension · mean |cos(e, p)| {interference['mean_abs_cos']:.3f}",
                               f"E's variance in P {interference['e_variance_in_p_subspace']:.3f}"
                               f" · random {interference['random_share']:.3f}")

    def _panel_titles(self, rms: str, angles: str) -> None:
        self.panel_titles[0].set_full_text(rms)
        self.panel_titles[1].set_full_text(angles)

    def _show_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))
        for side in ("bottom", "left"):          # no numbers on an axis with nothing on it
            self.angles.getAxis(side).setStyle(showValues=not text)
        if text:
            self.angles.setXRange(0, 1, padding=0)
            self.note.setPos(0.5, 0.5)

    # -- hover over either panel --------------------------------------------------------
    def hover_at(self, x: float, y: float) -> Optional[str]:
        if self.shown is None:
            return None
        d = int(round(x))
        parts = []
        rms_e, rms_p = self.shown["rms_e"], self.shown["rms_p"]
        if 0 <= d < len(rms_e):
            parts.append(f"e {rms_e[d]:.4f}")
        if 0 <= d - self.offset_p < len(rms_p):
            parts.append(f"p {rms_p[d - self.offset_p]:.4f}")
        return f"dimension {d}: RMS " + ", ".join(parts) if parts else None

    def angle_at(self, x: float) -> Optional[str]:
        if self.shown is None:
            return None
        cosines = self.shown["principal_angle_cosines"]
        k = int(round(x))
        if not 0 <= k < len(cosines):
            return None
        angle = np.degrees(np.arccos(np.clip(cosines[k], -1.0, 1.0)))
        return f"principal angle {k}: cos {cosines[k]:.4f} ({angle:.1f}°)"

    def _on_mouse_moved(self, scene_pos) -> None:
        view = self.angles.vb
        if not view.sceneBoundingRect().contains(scene_pos):
            super()._on_mouse_moved(scene_pos)
            return
        text = self.angle_at(view.mapSceneToView(scene_pos).x())
        if text:
            self.hovered.emit(text)
            QToolTip.showText(QCursor.pos(), text, self)
        else:
            QToolTip.hideText()
