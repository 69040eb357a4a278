"""Reusable figures: heatmap with colour bar, bars, lines, scatter. Each is a widget whose
`figure` layout is the exportable figure."""
from .bars import Bars
from .common import configure_pyqtgraph
from .figure import Figure
from .heatmap import Heatmap
from .lines import Curve, Lines
from .scatter import Scatter
from .stacked_bars import StackedBars

__all__ = ["Bars", "Curve", "Figure", "Heatmap", "Lines", "Scatter", "StackedBars", "configure_pyqtgraph"]
