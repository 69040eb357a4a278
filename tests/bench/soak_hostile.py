"""The soak of issue 25: 1,000 random UI actions in the main window, mixed with hostile files —
a weights file truncated while it is open, a FIFO, a shard index pointing outside its folder,
NaN/Inf weights — besides typing, stepping, selecting, layers and heads, and opening good models.

    python tests/bench/soak_hostile.py [N_ACTIONS] [SEED]      (default 1000, 0)

Counts: exceptions (any Python exception reaching the event loop, any Qt warning), hangs (an
action whose work does not settle within 20 s), losses (the text typed, or the model open,
changed by a failed open; the trace gone), and the window's longest event-loop stall (a 2 ms
timer's longest gap, ui/stall_meter.py) with what was happening then. Runs on whatever Qt
platform is set (offscreen by default)."""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
from PySide6.QtCore import QSettings, qInstallMessageHandler  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from tests.builders import (bytelevel_tokenizer, gpt2_folder, random_params, tiny_config,  # noqa: E402
                            write_npz_model)
from transformer_stepper.core.model import stages  # noqa: E402
from transformer_stepper.ui.app import application, create_main_window  # noqa: E402
from transformer_stepper.ui.stall_meter import StallMeter  # noqa: E402

WORDS = "the bank of the river was wide and she sat by the money bank".split()
problems: list[str] = []


def _hook(kind, value, tb):
    problems.append("".join(traceback.format_exception(kind, value, tb))[-600:])


def _qt_message(mode, context, message):
    if "propagateSizeHints" not in message:
        problems.append(f"Qt: {message}")


def hostile_files(root: Path) -> dict[str, Path]:
    files = {"good": gpt2_folder(root / "good"), "good2": gpt2_folder(root / "good2", seed=4)}
    config = tiny_config("gpt2")
    params = {name: value.copy() for name, value in random_params(config, seed=1).items()}
    params["h.0.mlp.fc.w"][:, :5] = np.nan
    params["h.1.attn.q.w"][0, 0] = np.inf
    files["nan"] = write_npz_model(root / "nan.npz", config, params, bytelevel_tokenizer())
    os.mkfifo(root / "fifo.npz")
    files["fifo"] = root / "fifo.npz"
    sharded = gpt2_folder(root / "traversal", shards=2)
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    index["weight_map"] = {name: "../good/model.safetensors" for name in index["weight_map"]}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    files["traversal"] = sharded
    return files


def settle(app, window, deadline_s: float = 20.0) -> bool:
    end = time.perf_counter() + deadline_s
    while time.perf_counter() < end:
        app.processEvents()
        if not window.session.busy and window.session.workers.idle:
            return True
        QTest.qWait(2)
    return False


def main() -> int:
    n_actions = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    sys.excepthook = _hook
    qInstallMessageHandler(_qt_message)
    app = application()
    root = Path(tempfile.mkdtemp(prefix="soak-"))
    files = hostile_files(root)
    window = create_main_window(str(files["good"]), "the bank of the river",
                                settings=QSettings(str(root / "settings.ini"), QSettings.Format.IniFormat))
    window.show()
    session = window.session
    settle(app, window)
    meter = StallMeter()
    meter.start()
    hangs, losses, counts = 0, [], {}
    truncate_ready = None         # a copy of a good model, opened, to be truncated under it

    def act(name: str) -> None:
        nonlocal truncate_ready
        counts[name] = counts.get(name, 0) + 1
        meter.label = name
        if name == "type":
            session.set_text(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))))
        elif name == "step":
            session.step(rng.choice((-1, 1)))
        elif name == "stage":
            keys = [s.key for s in stages.available_stages(session.model.config)]
            session.set_stage(rng.choice(keys))
        elif name == "select" and session.trace is not None:
            session.select_token(rng.randrange(session.trace.n_seq))
        elif name == "layer":
            session.set_layer(rng.randrange(session.model.config.n_layer))
        elif name == "head":
            session.set_head(rng.randrange(session.model.config.n_head))
        elif name in ("fifo", "traversal", "nan", "good", "good2"):
            text, model = session.text, session.model
            window.open_model(str(files[name]))
            if not settle(app, window):
                return
            if name in ("fifo", "traversal") and (session.text != text or session.model is not model):
                losses.append(f"{name}: the failed open changed the text or the model")
        elif name == "truncate":
            copy = root / f"copy{counts[name]}"
            shutil.copytree(files["good"], copy)
            window.open_model(str(copy))
            if not settle(app, window):
                return
            path = copy / "model.safetensors"
            with open(path, "r+b") as handle:
                handle.truncate(path.stat().st_size // 2)
            truncate_ready = (session.trace, session.text)
        if session.trace is None:
            losses.append(f"after {name}: no trace on screen")

    actions = (["type"] * 20 + ["step"] * 20 + ["stage"] * 12 + ["select"] * 12 + ["layer"] * 6
               + ["head"] * 6 + ["fifo", "traversal", "nan", "good", "good2", "truncate"] * 2)
    start = time.perf_counter()
    for i in range(n_actions):
        act(rng.choice(actions))
        if not settle(app, window):
            hangs += 1
            problems.append(f"action {i}: still busy after 20 s")
        QTest.qWait(rng.choice((0, 1, 5)))
    meter.label = "end"
    label, longest = meter.worst()
    meter.stop()
    print(f"{n_actions} actions in {time.perf_counter() - start:.0f} s on {os.environ.get('QT_QPA_PLATFORM')}: "
          f"{', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}")
    print(f"exceptions {len(problems)}, hangs {hangs}, lost {len(losses)}, "
          f"longest stall {1000 * longest:.0f} ms (during '{label}')")
    print("longest stall per action: " + ", ".join(
        f"{k} {1000 * v:.0f}" for k, v in sorted(meter.longest.items(), key=lambda kv: -kv[1])))
    for problem in problems[:5] + losses[:5]:
        print("---", problem)
    window.close()
    session.shutdown(10_000)
    shutil.rmtree(root, ignore_errors=True)
    return 1 if problems or hangs or losses else 0


if __name__ == "__main__":
    sys.exit(main())
