"""The arrows run one way: core and io never import Qt (nor torch/transformers, which the app
must never need). Checked in a fresh interpreter, importing every module of both packages."""
import json
import subprocess
import sys

SCRIPT = r"""
import importlib, json, pkgutil, sys
import transformer_stepper, transformer_stepper.cli
imported = ["transformer_stepper", "transformer_stepper.cli"]
for package in ("transformer_stepper.core", "transformer_stepper.io"):
    module = importlib.import_module(package)
    imported.append(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        importlib.import_module(info.name)
        imported.append(info.name)
banned = ("PySide6", "pyqtgraph", "shiboken6", "torch", "transformers")
loaded = sorted({name.split(".")[0] for name in sys.modules} & set(banned))
print(json.dumps({"imported": imported, "loaded": loaded}))
"""


def test_core_and_io_import_no_qt_and_no_torch():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"transformer_stepper.core.forward", "transformer_stepper.core.tokenize",
            "transformer_stepper.io.loader", "transformer_stepper.io.safetensors_file"} <= set(report["imported"])
    assert report["loaded"] == [], f"core/io pulled in {report['loaded']}"
