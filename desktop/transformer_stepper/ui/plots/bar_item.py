"""The one bar item every bar chart uses. pyqtgraph's BarGraphItem says it implements
'plotData', so a PlotItem keeps it among its curves, and the plot menu's options (Plot Options →
Alpha, its FFT, mean, downsampling and clip settings, and PlotItem.restoreState) call curve
methods on it that it lacks: `setAlpha` raised AttributeError from PlotItem.updateAlpha. Here a
bar item is no curve: it takes no part in the curve options, and answers the few curve calls a
caller may still make."""
from __future__ import annotations

import pyqtgraph as pg


class BarItem(pg.BarGraphItem):
    def implements(self, interface=None):
        interfaces: list[str] = []            # not 'plotData': bars are not a curve
        return interfaces if interface is None else interface in interfaces

    # the curve calls of PlotItem's options: transparency applies, the rest mean nothing for bars
    def setAlpha(self, alpha: float, auto: bool = False) -> None:
        self.setOpacity(1.0 if auto else float(alpha))

    def setFftMode(self, *_args) -> None:
        pass

    def setSubtractMeanMode(self, *_args) -> None:
        pass

    def setDownsampling(self, *_args, **_kwargs) -> None:
        pass

    def setClipToView(self, *_args) -> None:
        pass

    def setLogMode(self, *_args) -> None:
        pass

    def setPointMode(self, *_args) -> None:
        pass
