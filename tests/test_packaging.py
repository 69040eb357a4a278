"""The distribution carries everything: every package of the source tree is listed in
pyproject.toml, and a wheel holds the resources (built-in model, explanations)."""
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_source_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    source = {".".join(p.relative_to(ROOT / "desktop").parts)
              for p in (ROOT / "desktop").rglob("__init__.py") for p in [p.parent]}
    assert source <= listed, f"add to pyproject.toml's packages: {sorted(source - listed)}"
    resources = {"transformer_stepper.resources." + p.name for p in (ROOT / "resources").iterdir() if p.is_dir()}
    assert resources | {"transformer_stepper.resources"} <= listed, "every resources/ folder is packaged"


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the source tree")
def test_the_wheel_carries_the_resources(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(tmp_path), str(ROOT)], check=True, stdout=subprocess.DEVNULL)
    wheel = next(tmp_path.glob("transformer_stepper-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for resource in ("model/config.json", "model/model.safetensors", "model/tokenizer.json",
                     "explanations/softmax.md", "translator/config.json", "translator/model.safetensors",
                     "translator/tokenizer.json"):
        assert f"transformer_stepper/resources/{resource}" in names, resource
    assert "transformer_stepper/io/families/llama.py" in names
