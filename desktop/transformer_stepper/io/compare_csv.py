"""compare.csv: one row per hidden-state index (0 = the embedding output, i = the output of
layer i - 1), one column per pair of compared tokens (their cosine), then one column per token
(its cosine to its own state 0). Floats as the shortest text that reads back as the same
float64."""
from __future__ import annotations

from pathlib import Path

from ..core.analysis.compare import Comparison
from .array_export import write_bytes

FILE_NAME = "compare.csv"


def compare_csv_bytes(comparison: Comparison) -> bytes:
    columns, values = comparison.table()
    lines = [",".join(["index", "state"] + columns)]
    for i, name in enumerate(comparison.state_names):
        lines.append(",".join([str(i), name] + [repr(float(v)) for v in values[i]]))
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_compare_csv(folder: Path, comparison: Comparison) -> tuple[Path, bool]:
    """Atomic; -> (path, replaced an existing file). ModelError names the file on failure."""
    path = Path(folder) / FILE_NAME
    return path, write_bytes(path, compare_csv_bytes(comparison))
