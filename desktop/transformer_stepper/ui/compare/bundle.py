"""The Compare figures as one set, drawn from one Comparison: the view shows them, the headless
command renders them. Plot names are the export names (`compare-<n>-<name>[-L<l>H<h>].<fmt>`)."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from ...core.analysis.compare import Comparison
from ..plots.figure import Figure
from .figures import AttentionFigure, CosineFigure, EntryFigure, LookupFigure, RotationFigure
from .map_figure import MapFigure
from .nearest_figure import NearestFigure

# (number, export name) in the order the figures are numbered; "entry_rotation" replaces "entry"
# for rotary models
PLOTS = ((1, "lookup_row"), (2, "entry"), (2, "entry_rotation"), (3, "cosine_across_layers"),
         (4, "map"), (5, "nearest_words"), (6, "attention"))


def file_name(number: int, name: str, layer: int, head: int, file_format: str) -> str:
    suffix = f"-L{layer}H{head}" if name == "attention" else ""
    return f"compare-{number}-{name}{suffix}.{file_format}"


class CompareFigures:
    def __init__(self) -> None:
        self.lookup = LookupFigure()
        self.entry = EntryFigure()
        self.rotation = RotationFigure()
        self.cosines = CosineFigure()
        self.map = MapFigure()
        self.nearest = NearestFigure()
        self.attention = AttentionFigure()
        self.by_name: dict[str, Figure] = {
            "lookup_row": self.lookup, "entry": self.entry, "entry_rotation": self.rotation,
            "cosine_across_layers": self.cosines, "map": self.map, "nearest_words": self.nearest,
            "attention": self.attention}
        self.rotary = False

    def draw(self, comparison: Comparison, attention: Optional[Sequence[np.ndarray]], layer: int,
             head: int, labels: Sequence[Sequence[str]]) -> None:
        """Every figure at once; `attention` None leaves that figure as it was."""
        for step in self.steps(comparison, attention, layer, head, labels):
            step()

    def steps(self, comparison: Comparison, attention: Optional[Sequence[np.ndarray]], layer: int,
              head: int, labels: Sequence[Sequence[str]]) -> list[Callable[[], None]]:
        """The drawing as one call per figure, most telling first: the view runs one per
        event-loop turn, so the window answers input between them and each figure paints as
        soon as it is fed."""
        trace = next((s.trace for s in comparison.sentences if s.trace is not None), None)
        self.rotary = trace is not None and trace.config.position == "rotary"
        if not comparison.occurrences:
            return []
        steps = [lambda: self.cosines.draw(comparison, layer),
                 lambda: self.lookup.draw(comparison),
                 lambda: (self.rotation if self.rotary else self.entry).draw(comparison)]
        if attention is not None:
            steps.append(lambda: self.draw_attention(comparison, attention, layer, head, labels))
        steps += [lambda: self.nearest.draw(comparison), lambda: self.map.draw(comparison, layer)]
        return steps

    def draw_attention(self, comparison: Comparison, attention: Sequence[np.ndarray], layer: int,
                       head: int, labels: Sequence[Sequence[str]]) -> None:
        self.attention.draw(comparison, attention, layer, head,
                            [labels[occ.sentence] for occ in comparison.occurrences])

    def set_layer(self, layer: int) -> None:
        """Mark the layer chosen in the toolbar on the cosines and the map."""
        self.cosines.layer_line.setValue(layer + 1)
        self.map.mark_state(layer + 1)

    def plots(self) -> list[tuple[int, str, Figure]]:
        """(number, name, figure) of what applies to the model drawn."""
        skip = "entry" if self.rotary else "entry_rotation"
        return [(number, name, self.by_name[name]) for number, name in PLOTS if name != skip]

    def close(self) -> None:
        for figure in self.by_name.values():
            figure.close()
            figure.deleteLater()
