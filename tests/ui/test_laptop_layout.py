"""Every view fits a laptop's screen: at 1280 x 720, 1366 x 768 and 1920 x 1080 at 150 %
(1280 x 720 logical pixels), with every tab, every stage of layer 0 (the built-in model, a GGUF
file and an encoder), the Questions, Provenance and Dequantization docks and the translator, the
window's frame and minimum size fit the screen's available area and every plot keeps a legible
view box. Each screen size is its own process (tests/ui/laptop_layout.py): Qt's offscreen
platform takes its screen's size when it starts. They run two at a time (one after another
they took the sum of their times)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENS = [(1366, 768, None), (1280, 720, None), (1920, 1080, "1.5")]


class Layouts:
    """The three processes, two at a time (the machine's two cores): a test starts its own
    process, if not started, and the next one's, then waits for its own."""

    def __init__(self, folder: Path, chosen: list[tuple]) -> None:
        self.folder = folder
        self.chosen = chosen               # the screens whose tests run, in their order
        self.started: dict[tuple, tuple] = {}

    def start(self, screen: tuple) -> tuple:
        if screen not in self.started:
            width, height, scale = screen
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "desktop"), str(ROOT), env.get("PYTHONPATH", "")])
            env.pop("QT_SCALE_FACTOR", None)
            if scale:
                env["QT_SCALE_FACTOR"] = scale
            name = f"{width}x{height}x{scale or 1}"
            out, err = open(self.folder / f"{name}.out", "w+"), open(self.folder / f"{name}.err", "w+")
            process = subprocess.Popen([sys.executable, "-m", "tests.ui.laptop_layout", str(width), str(height)],
                                       cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
            self.started[screen] = (process, out, err)
        return self.started[screen]

    def run(self, screen: tuple) -> tuple[int, str, str]:
        """-> (return code, stdout, stderr) of `screen`'s process."""
        process, out, err = self.start(screen)
        following = self.chosen.index(screen) + 1
        if following < len(self.chosen):
            self.start(self.chosen[following])
        returncode = process.wait(timeout=600)
        out.seek(0)
        err.seek(0)
        return returncode, out.read(), err.read()

    def stop(self) -> None:
        for process, out, err in self.started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
            out.close()
            err.close()


@pytest.fixture(scope="module")
def layouts(request, tmp_path_factory):
    chosen = [screen for screen in SCREENS
              if any(f"[{screen[0]}-{screen[1]}-{screen[2]}]" in item.nodeid for item in request.session.items)]
    layouts = Layouts(tmp_path_factory.mktemp("laptop_layout"), chosen)
    yield layouts
    layouts.stop()


@pytest.mark.parametrize("width, height, scale", SCREENS)
def test_every_view_fits_the_screen(layouts, width, height, scale):
    returncode, stdout, stderr = layouts.run((width, height, scale))
    assert returncode == 0, stderr[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    logical = (round(width / float(scale or 1)), round(height / float(scale or 1)))
    assert tuple(report["screen"]) == logical
    assert report["visits"] > 50                  # every tab, stage and dock was visited
    assert report["problems"] == []
