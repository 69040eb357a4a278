"""Render the positions-lab figure of docs/guide.md from the shipped results, with the Positions tab's
own figure code, offscreen:

    PYTHONPATH=desktop python tests/make_positions_figure.py

writes docs/images/positions-interference-sum_sinusoidal.png (800 x 600)."""
import shutil
import tempfile
from pathlib import Path

from transformer_stepper.io.resources import resources_dir
from transformer_stepper.ui.positions.headless import write_lab_figures

NAME = "positions-interference-sum_sinusoidal.png"
TARGET = Path(__file__).resolve().parents[1] / "docs" / "images" / NAME


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        write_lab_figures(resources_dir() / "positions", out=Path(tmp))
        shutil.copyfile(Path(tmp) / NAME, TARGET)
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
