"""The Positions figures as one set: the view shows them, File → Export and the
`positions-lab` command render them (`positions-curves.<fmt>`,
`positions-interference-<variant>.<fmt>`, `positions-interference-your-model.<fmt>`)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from ...io.array_export import write_bytes
from ...io.positions_lab import LabFolder
from ..export.render import ExportOptions, encode, render
from ...state.positions import why_no_vector
from .figures import CurvesFigure, InterferenceFigure

YOUR_MODEL = "your-model"


def file_name(name: str, file_format: str) -> str:
    return f"positions-{name}.{file_format}"


def measured_variants(lab: LabFolder) -> list[str]:
    """The variants with a position vector to measure (sum_sinusoidal, sum_learned, concat)."""
    return [name for name, v in lab.variants.items() if v.result.get("interference")]


class PositionsFigures:
    def __init__(self) -> None:
        self.curves = CurvesFigure()
        self.variant = InterferenceFigure("E–P interference of the selected variant")
        self.your_model = InterferenceFigure("E–P interference of your model")
        self.variant_name: Optional[str] = None

    def draw_lab(self, lab: LabFolder, selected: Optional[str]) -> None:
        self.curves.draw(lab.variants, selected)
        self.draw_variant(lab, selected)

    def draw_variant(self, lab: LabFolder, selected: Optional[str]) -> None:
        self.variant_name = selected
        self.curves.select(selected)
        variant = lab.variants.get(selected) if selected else None
        if variant is None:
            self.variant.draw("no variant selected", None, "click a row of the table")
            return
        measured = variant.result.get("interference")
        self.variant.draw(selected, measured,
                          "" if measured else why_no_vector(selected))

    def write_lab(self, lab: LabFolder, folder: Path, options: ExportOptions, description: str = "",
                  on_written: Optional[Callable[[Path, bool], None]] = None) -> list[Path]:
        """The curves and the interference figure of every measured variant, into `folder`
        (GUI thread). The selected variant is drawn again afterwards."""
        written = [self._write(self.curves, "curves", folder, options, description, on_written)]
        shown = self.variant_name
        try:
            for name in measured_variants(lab):
                self.draw_variant(lab, name)
                written.append(self._write(self.variant, f"interference-{name}", folder, options,
                                           description, on_written))
        finally:
            self.draw_variant(lab, shown)
        return written

    def write_your_model(self, folder: Path, options: ExportOptions, description: str = "") -> Path:
        return self._write(self.your_model, f"interference-{YOUR_MODEL}", folder, options, description)

    @staticmethod
    def _write(figure, name: str, folder: Path, options: ExportOptions, description: str,
               on_written=None) -> Path:
        path = Path(folder) / file_name(name, options.format)
        replaced = write_bytes(path, encode(render(figure.figure, options, figure.title, description)))
        if on_written is not None:
            on_written(path, replaced)
        return path

    def close(self) -> None:
        for figure in (self.curves, self.variant, self.your_model):
            figure.close()
            figure.deleteLater()
