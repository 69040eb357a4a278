"""The figures of a positions-lab folder rendered with no display, for `transformer-stepper
positions-lab` (its output folder) and docs/make_positions_figure.py: positions-curves.<fmt>
and positions-interference-<variant>.<fmt> for every variant with a position vector, drawn by
the Positions tab's own figures."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from ...io.export_formats import DEFAULT_FIGURE_FORMAT
from ...io.positions_lab import read_lab_folder
from ..offscreen import ensure_application

Say = Callable[[str], None]


def write_lab_figures(folder: Path, say: Optional[Say] = None, file_format: str = DEFAULT_FIGURE_FORMAT,
                      scale: float = 1.0, out: Optional[Path] = None) -> list[Path]:
    """Read the lab folder at `folder`, write its figures into `out` (default: the same folder).
    -> the files written."""
    ensure_application()
    from ..export.render import ExportOptions
    from .bundle import PositionsFigures

    lab = read_lab_folder(folder)
    figures = PositionsFigures()

    def report(path: Path, replaced: bool) -> None:
        if say is not None:
            say(f"wrote {path.name}" + (" (replaced the existing file)" if replaced else ""))

    try:
        figures.draw_lab(lab, next(iter(lab.variants)))
        options = ExportOptions(format=file_format, scale=float(scale))
        description = f"Transformer Stepper · positions laboratory · {Path(folder).name}"
        return figures.write_lab(lab, Path(out or folder), options, description, report)
    finally:
        figures.close()
