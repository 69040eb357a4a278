"""Every view fits a laptop's screen: at 1280 x 720, 1366 x 768 and 1920 x 1080 at 150 %
(1280 x 720 logical pixels), with every tab, every stage of layer 0 (the built-in model, a GGUF
file and an encoder), the Questions, Provenance and Dequantization docks and the translator, the
window's frame and minimum size fit the screen's available area and every plot keeps a legible
view box. Each screen size is its own process (tests/ui/laptop_layout.py): Qt's offscreen
platform takes its screen's size when it starts."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("width, height, scale", [(1366, 768, None), (1280, 720, None),
                                                  (1920, 1080, "1.5")])
def test_every_view_fits_the_screen(width, height, scale):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "desktop"), str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("QT_SCALE_FACTOR", None)
    if scale:
        env["QT_SCALE_FACTOR"] = scale
    done = subprocess.run([sys.executable, "-m", "tests.ui.laptop_layout", str(width), str(height)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    logical = (round(width / float(scale or 1)), round(height / float(scale or 1)))
    assert tuple(report["screen"]) == logical
    assert report["visits"] > 50                  # every tab, stage and dock was visited
    assert report["problems"] == []
