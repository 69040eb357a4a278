"""File → Export Figures of This Tab on the Positions tab: the curves, the interference figure
of every measured variant and of your model, as PNG and SVG, and the table as
positions-table.csv (long format: variant, measure, mean, min, max, seeds, standing)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ...core.model.errors import ModelError
from ...io.positions_lab import SUMMARY_FILE, write_summary_csv
from ..export import preferences
from ..export import dialogs
from ..export.menu import warn
from ..export.render import FORMATS, ExportOptions
from .results import summary_rows


def export_view(view, folder: Optional[str] = None) -> list[Path]:
    """Ask for a folder (unless given), then write every figure and the table. -> the files."""
    if view.lab is None:
        warn(view, "Nothing to export", "no positions-lab results are shown")
        return []
    if folder is None:
        folder = dialogs.ask_folder(view, "Export the Positions figures and table into", str(preferences.folder(view)))
        if not folder:
            return []
    folder = Path(folder)
    existing = sorted(p.name for p in folder.glob("positions-*") if p.is_file())
    if existing and not dialogs.ask_replace(view, folder, existing):
        return []
    preferences.set_folder(view, folder)
    description = f"Transformer Stepper · positions laboratory · {view.lab.root.name}"
    your_model = view.your_model
    written: list[Path] = []
    try:
        for file_format in FORMATS:
            options = ExportOptions(format=file_format, scale=preferences.scale(view), dark=preferences.dark(view))
            written += view.figures.write_lab(view.lab, folder, options, description)
            if your_model.state == "measured":
                written.append(view.figures.write_your_model(folder, options, description))
        path = folder / SUMMARY_FILE
        measured = (your_model.name, your_model.interference) if your_model.state == "measured" else None
        write_summary_csv(path, summary_rows(view.table_data, measured))
        written.append(path)
    except ModelError as exc:
        warn(view, "Export failed", str(exc))
        return written
    status = getattr(view.window(), "statusBar", None)
    if callable(status):
        status().showMessage(f"wrote {len(written)} files into {folder}", 8000)
    return written
