"""One exportable figure: a GraphicsLayoutWidget whose layout (`figure`) stands on its own —
title, axis labels, colour bar — with hover and click mapped to data coordinates; the ViewBox it
plots in, and the fixes this project applies to pyqtgraph's own classes (applied on import)."""
from __future__ import annotations

from typing import Optional

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, QSize, QSizeF, Qt, QTimer, Signal
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QToolTip, QWidget

from .axis import LabelAxis
from .common import FIGURE_LEAST, LABEL_STYLE, VIEW_BOX_LEAST, configure_pyqtgraph, finite_span
from .title import TitleLabel

def _tolerate_half_freed(cls, name: str, empty) -> None:
    # When the collector frees a closed figure caught in one of pyqtgraph's own reference
    # cycles, it clears the items' __dict__ before Qt deletes their C++ half, and Qt may still
    # call their overrides while it tears the layout down (sizeHint, boundingRect,
    # resizeEvent): they would raise in the event loop ("LabelItem has no attribute
    # _sizeHint"). ui/collector.py carries out Qt's deferred deletions before collecting,
    # which removes most of it; an item that is half-freed anyway answers "nothing" here.
    method = getattr(cls, name)

    def guarded(self, *args):
        if not self.__dict__:
            return empty()
        return method(self, *args)

    guarded.__name__, guarded.__doc__ = method.__name__, method.__doc__
    setattr(cls, name, guarded)


def _curve_options_for_curves_only(name: str) -> None:
    # PlotItem counts every item that says it implements 'plotData' as a curve (a BarGraphItem,
    # a ScatterPlotItem), and its menu's Plot Options (alpha, FFT, mean, downsampling) and
    # restoreState call PlotDataItem methods on each: setAlpha raised AttributeError on bars.
    # The options apply to the curves that have them; the project's bars are no curves at all
    # (plots/bar_item.py).
    method = getattr(pg.PlotItem, name)

    def guarded(self, *args):
        every = self.curves
        self.curves = [c for c in every if isinstance(c, pg.PlotDataItem)]
        try:
            return method(self, *args)
        finally:
            self.curves = every

    guarded.__name__, guarded.__doc__ = method.__name__, method.__doc__
    setattr(pg.PlotItem, name, guarded)


for _option in ("updateAlpha", "updateSpectrumMode", "updateSubtractMeanMode", "updateDownsampling"):
    _curve_options_for_curves_only(_option)

_tolerate_half_freed(pg.LabelItem, "sizeHint", lambda: QSizeF(0, 0))
_tolerate_half_freed(pg.LabelItem, "resizeEvent", lambda: None)
_tolerate_half_freed(pg.GraphicsWidget, "boundingRect", QRectF)


def adopt_plot_menus(plot: pg.PlotItem, owner) -> None:
    """A PlotItem makes a parentless QMenu and WidgetGroup (its "Plot Options") that sit in a
    reference cycle with it: once the figure is gone, the cycle collector would destroy those
    Qt objects in whichever thread it happens to run in (a worker's: a deadlock or a crash).
    Parented to the figure, Qt deletes them with it, on the GUI thread."""
    menu = getattr(plot, "ctrlMenu", None)
    if menu is not None:
        menu.setParent(owner, menu.windowFlags())
    group = getattr(plot, "stateGroup", None)
    if group is not None:
        group.setParent(owner)


class LazyMenuViewBox(pg.ViewBox):
    """A ViewBox whose right-click menu (two axis panels of Qt widgets, a few ms per plot) is
    made on the first right-click: a stage shows several plots, and most are never
    right-clicked, so building every menu up front only delays the first view of a stage."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, enableMenu=False, **kwargs)
        self.state["enableMenu"] = True      # enabled; it just does not exist yet

    def setRange(self, rect=None, xRange=None, yRange=None, *args, **kwargs):
        # one policy for non-finite numbers (corrupt weights): a range computed from NaN or Inf
        # values is not applied (pyqtgraph raises on it) and the axis keeps what it shows
        xRange, yRange = finite_span(xRange), finite_span(yRange)
        if rect is None and xRange is None and yRange is None:
            return
        super().setRange(rect, xRange, yRange, *args, **kwargs)

    def wheelEvent(self, ev, axis=None):
        # the wheel scrolls what holds the plot (a stage's column of figures, a dock) and
        # zooms only with Ctrl held: over a column of plots a plain wheel zoomed whichever
        # plot was under the pointer, and the column could not be scrolled from there
        if not ev.modifiers() & Qt.KeyboardModifier.ControlModifier:
            ev.ignore()
            return
        super().wheelEvent(ev, axis)

    def getMenu(self, ev):
        if self.menu is None and self.menuEnabled():
            self._applyMenuEnabled()         # pyqtgraph's own way to make it
        return self.menu

    def getContextMenus(self, event):
        menu = self.getMenu(event)
        return menu.actions() if menu is not None else []


class Figure(pg.GraphicsLayoutWidget):
    """One exportable figure: `figure` (the layout) holds a titled PlotItem, and subclasses add
    items once and feed them data. Hover shows `hover_at(x, y)`; a click on a token emits
    tokenClicked with `token_at(x, y)`. Alt-click or Ctrl-click (or a plain click where a click
    selects nothing) emits cellClicked with `cell_at(x, y)`: the value to explain."""

    tokenClicked = Signal(int)
    cellClicked = Signal(int, int)     # (row, column) of a heatmap, (bar, 0) of bars
    hovered = Signal(str)

    def __init__(self, title: str, x_label: str = "", y_label: str = "",
                 parent: Optional[QWidget] = None) -> None:
        configure_pyqtgraph()
        super().__init__(parent)
        self.x_axis = LabelAxis("bottom")
        self.y_axis = LabelAxis("left")
        self.title_label = TitleLabel(title)
        self.ci.addItem(self.title_label, row=0, col=0, colspan=2)
        self.plot = self.ci.addPlot(row=1, col=0, axisItems={"bottom": self.x_axis, "left": self.y_axis},
                                    viewBox=LazyMenuViewBox())
        adopt_plot_menus(self.plot, self)
        self.plot.hideButtons()
        self.set_title(title)
        self.plot.setLabel("bottom", x_label, **LABEL_STYLE)
        self.plot.setLabel("left", y_label, **LABEL_STYLE)
        self.setMinimumSize(FIGURE_LEAST)
        self._legible_pending = False
        # the chrome grows with new data too (longer tick labels, a wrapped title): the view box
        # then shrinks inside an unchanged figure, and the minimum is checked again
        self.plot.vb.sigResized.connect(self._check_legible_soon)
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.scene().sigMouseClicked.connect(self._on_mouse_clicked)

    # -- a legible minimum --------------------------------------------------------------
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._check_legible_soon()

    def showEvent(self, event) -> None:
        # a figure laid out while hidden (built ahead or while idle) was never checked: its
        # view box may have been crushed since by a colour bar or a long token label
        super().showEvent(event)
        self._check_legible_soon()

    def _check_legible_soon(self, *_) -> None:
        if not getattr(self, "_legible_pending", True):
            # once pyqtgraph has laid out the title and axes (its layout runs after this event)
            self._legible_pending = True
            QTimer.singleShot(0, self, self.keep_legible)

    def chrome(self) -> QSize:
        """What the title, the axes, their labels and a colour bar take around the view box."""
        box = self.plot.vb.sceneBoundingRect()
        return QSize(max(0, self.width() - int(box.width())), max(0, self.height() - int(box.height())))

    def keep_legible(self) -> None:
        """The figure's minimum size: its chrome plus a legible view box (VIEW_BOX_LEAST), so a
        narrow window scrolls or reflows the plots rather than crushing them."""
        self._legible_pending = False
        if not self.isVisible():
            return
        chrome = self.chrome()
        want = QSize(max(FIGURE_LEAST.width(), chrome.width() + VIEW_BOX_LEAST.width()),
                     max(FIGURE_LEAST.height(), chrome.height() + VIEW_BOX_LEAST.height()))
        least = self.minimumSize()
        if abs(want.width() - least.width()) > 2 or abs(want.height() - least.height()) > 2:
            self.setMinimumSize(want)

    def finish(self) -> None:
        """Make what the figure makes only when first needed (a heatmap's colour bar): the
        window calls it in an idle turn of its own, so building a view stays short."""

    @property
    def finished(self) -> bool:
        """Nothing left for finish() to make."""
        return True

    def set_axis_labels(self, x_label: str, y_label: Optional[str] = None) -> None:
        self.plot.setLabel("bottom", x_label, **LABEL_STYLE)
        if y_label is not None:
            self.plot.setLabel("left", y_label, **LABEL_STYLE)

    @property
    def figure(self) -> pg.GraphicsLayout:
        """The item to export: it holds the title, the axes and any colour bar."""
        return self.ci

    def set_title(self, title: str) -> None:
        self.title = title
        self.title_label.set_full_text(title)

    # -- overridden by the plot kinds ---------------------------------------------------
    def hover_at(self, x: float, y: float) -> Optional[str]:
        return None

    def token_at(self, x: float, y: float) -> Optional[int]:
        return None

    def cell_at(self, x: float, y: float) -> Optional[tuple[int, int]]:
        return None

    # -- mouse --------------------------------------------------------------------------
    def _data_point(self, scene_pos) -> Optional[QPointF]:
        view = self.plot.vb
        if not view.sceneBoundingRect().contains(scene_pos):
            return None
        return view.mapSceneToView(scene_pos)

    def _on_mouse_moved(self, scene_pos) -> None:
        point = self._data_point(scene_pos)
        text = self.hover_at(point.x(), point.y()) if point is not None else None
        if text:
            self.hovered.emit(text)
            QToolTip.showText(QCursor.pos(), text, self)
        else:
            QToolTip.hideText()

    def _on_mouse_clicked(self, event) -> None:
        if event.button() != pg.QtCore.Qt.MouseButton.LeftButton or event.double():
            return
        point = self._data_point(event.scenePos())
        if point is None:
            return
        self.click_at(point.x(), point.y(), event.modifiers())

    def click_at(self, x: float, y: float, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
        """A left click at data point (x, y): select a token, or ask where a value comes from."""
        explain = bool(modifiers & (Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ControlModifier))
        index = None if explain else self.token_at(x, y)
        if index is not None:
            self.tokenClicked.emit(int(index))
            return
        cell = self.cell_at(x, y)
        if cell is not None:
            self.cellClicked.emit(int(cell[0]), int(cell[1]))
