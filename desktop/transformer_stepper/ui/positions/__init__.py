"""The Positions tab (issue 13): the positions laboratory's results over seeds, beside the model
opened in the stepper.

    view.py      the tab: table, figures, explanation, open a variant, measure your model
    table.py     the results table (mean and min–max over seeds, best / tie / apart)
    results.py   what the table shows, as text and rows (also its CSV export)
    figures.py   the training curves and the E–P interference figure
    bundle.py    the figures as one set (the view shows them; export and the command render)
    explain.py   the numbers the explanation quotes (text in resources/explanations/positions.md)
    export.py    File → Export Figures of This Tab
    headless.py  the figures of a `positions-lab` output folder, rendered with no display

The numbers come from core/training (positions_lab, positions_table) and io/positions_lab."""
from .view import PositionsView

__all__ = ["PositionsView"]
