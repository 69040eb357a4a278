"""The figure formats an export writes, as a registry that every menu, dialog and --format reads.

    FIGURE_FORMATS   how one rendered figure is stored (png, svg), in the order menus list them;
                     each has its writer in ui/export/render.py (WRITERS: drawn on the GUI thread,
                     the file's bytes made in a worker), and ui/export checks at import that
                     every entry has one
    DATA_FORMATS     how a stage's arrays or the whole trace are stored: io/array_export.py

Adding a figure format is its entry here and its writer there: the right-click menus, the
export dialog, the Compare and Positions exports and the `--format` of `export` and `compare`
follow. No Qt here, so the command line can list the formats without loading it."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.model.errors import ModelError


@dataclass(frozen=True)
class FigureFormat:
    name: str            # the --format value and the file's extension ("png")
    label: str           # what the save dialog's filter calls it ("PNG image")

    @property
    def extension(self) -> str:
        return f".{self.name}"

    @property
    def file_filter(self) -> str:
        """The save dialog's filter: `PNG image (*.png)`."""
        return f"{self.label} (*{self.extension})"

    @property
    def menu_text(self) -> str:
        """The right-click entry: `Export as PNG…`."""
        return f"Export as {self.name.upper()}…"


FIGURE_FORMATS: tuple[FigureFormat, ...] = (
    FigureFormat("png", "PNG image"),
    FigureFormat("svg", "SVG drawing"),
)
DEFAULT_FIGURE_FORMAT = FIGURE_FORMATS[0].name


def figure_format_names() -> tuple[str, ...]:
    return tuple(f.name for f in FIGURE_FORMATS)


def figure_format(name: str) -> FigureFormat:
    for entry in FIGURE_FORMATS:
        if entry.name == name:
            return entry
    raise KeyError(f"unknown figure format {name!r} (known: {', '.join(figure_format_names())})")


def check_figure_format(name: str, option: str = "--format") -> None:
    """One line naming the option and the formats there are, for a format not registered."""
    if name not in figure_format_names():
        raise ModelError(f"{option} {name}: must be {_either(figure_format_names())}")


def _either(names: tuple[str, ...]) -> str:
    """`png or svg`, `png, svg or pdf`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
