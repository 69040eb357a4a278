"""Exporting figures and arrays: every plot as PNG or SVG (right-click, a stage, every stage),
headless (`transformer-stepper export`), and the trace's arrays.

    render.py   one figure -> PNG image / SVG text; file names; options (size, scale, theme)
    svg.py      makes Qt's SVG portable (flattened cosmetic strokes, crisp heatmap cells)
    snapshot.py a view state frozen at one model, trace and selection, whose layer/head export walks
    job.py      exporting many figures in small steps on the GUI thread, files written in a worker
    menu.py     the right-click entries on every plot
    dialogs.py  File → Export … (options, progress, overwrite questions)

Only render and menu are imported here: stages/base.py imports the menu, and job.py imports the
stage views."""
from .render import DEFAULT_SIZE, FORMATS, SCALES, ExportOptions, plot_file_name, render_png, render_svg

__all__ = ["DEFAULT_SIZE", "FORMATS", "SCALES", "ExportOptions", "plot_file_name", "render_png",
           "render_svg"]
