"""The longest event-loop stall of the window on a big model and a long text: the text traced and
drawn, every stage's view built while idle, a walk through every stage of every layer (→ held
down, each layer's detail computed in the worker as it is reached), then typing at the end
(keystrokes and deletions) and at the start (a whole pass). A stall is a gap between the ticks
of a 2 ms timer (ui/stall_meter.py): time the GUI thread spent away from the event loop.

    DISPLAY=:17 QT_QPA_PLATFORM=xcb python tests/bench/bench_stall_big.py MODEL_DIR [--tokens 1000]

Run it under Xvfb with a window manager (openbox) for a real window system; offscreen by
default. Prints the longest stall with what was happening, the five longest phases and how long
each phase took. --pause S sleeps S seconds before the walk (to attach py-spy to the pid)."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtCore import QSettings, Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from bench_big import cpu_name  # noqa: E402
from bench_ui import text_of, wait_for  # noqa: E402
from stall_sampler import StallSampler  # noqa: E402

from transformer_stepper.ui.app import application, create_main_window  # noqa: E402
from transformer_stepper.ui.stall_meter import StallMeter  # noqa: E402

TIMEOUT = 1200


def ms(seconds: float) -> str:
    return f"{1000 * seconds:,.0f} ms"


class Meters:
    """The stall meter (every gap, by label) and the sampler (the GUI thread's stacks in a stall)."""
    def __init__(self, stacks: bool) -> None:
        self.meter, self.sampler = StallMeter(), StallSampler(stacks=stacks)
        self.longest = self.meter.longest

    def mark(self, label: str) -> None:
        self.meter.label = self.sampler.label = label

    def start(self) -> None:
        self.meter.start()
        self.sampler.start()

    def stop(self) -> None:
        self.meter.stop()
        self.sampler.stop()

    def worst(self):
        return self.meter.worst()


def traced_and_drawn(app, window) -> None:
    session, stepper = window.session, window.stepper
    # (the view as it is: current_view() would build the rest of it at once, work the window
    # itself spreads over turns)
    wait_for(app, lambda: session.trace is not None and session.trace.text == stepper.text_box.text()
             and not session.busy and stepper.settled(), TIMEOUT)


def walk(app, window, meter) -> int:
    session, steps = window.session, 0
    session.set_stage("tokenize")
    traced_and_drawn(app, window)
    while True:
        meter.mark(f"walk: step to {session.stage_key}@{session.layer}")
        if not session.step(+1):
            return steps
        steps += 1
        meter.mark(f"walk: {session.stage_key} layer {session.layer}")
        traced_and_drawn(app, window)


def type_keys(app, window, meter, keys: str, where: str) -> None:
    box = window.stepper.text_box
    box.setFocus()
    box.setCursorPosition(0 if where == "start" else len(box.text()))
    for i, key in enumerate(keys):
        meter.mark(f"typing at the {where}: key {i + 1} {key!r} ({window.session.stage_key})")
        if key == "\b":
            QTest.keyClick(box, Qt.Key.Key_Backspace)
        else:
            QTest.keyClick(box, key)
        traced_and_drawn(app, window)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--stacks", action="store_true",
                        help="sample the GUI thread's stack in each stall (stall_sampler.py; this "
                             "crashed the process in 2 runs of 6)")
    args = parser.parse_args()
    app = application()
    print(f"CPU: {cpu_name()}; platform {os.environ['QT_QPA_PLATFORM']} DISPLAY={os.environ.get('DISPLAY')}; "
          f"pid {os.getpid()}; {args.model}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        window = create_main_window(args.model, "the", QSettings(f"{tmp}/s.ini", QSettings.Format.IniFormat))
        window.resize(1366, 740)
        window.show()
        session = window.session
        wait_for(app, lambda: session.trace is not None and not session.busy, TIMEOUT)
        text = text_of(session.model, args.tokens)    # (before the meter: text_of encodes
        meter, phases = Meters(args.stacks), {}      # growing prefixes on this thread)
        meter.start()
        begin = time.perf_counter()
        meter.mark(f"long text traced and drawn ({session.stage_key})")
        session.set_text(text, immediate=True)
        traced_and_drawn(app, window)
        phases["long text traced and drawn"] = time.perf_counter() - begin
        print(f"{session.trace.n_seq} tokens; {session.model.config.n_layer} layers", flush=True)
        begin = time.perf_counter()
        meter.mark("every view built while idle")
        wait_for(app, window.stepper.views_built, TIMEOUT)
        phases["views built while idle"] = time.perf_counter() - begin
        if args.pause:
            meter.mark("pause")
            wait_for(app, lambda: time.perf_counter() > begin + args.pause, TIMEOUT)
        begin = time.perf_counter()
        steps = walk(app, window, meter)
        phases[f"walk, {steps} steps"] = time.perf_counter() - begin
        session.set_stage("softmax")    # a per-layer stage (the logit lens, last, redoes every layer)
        for where, keys in (("end", " and\b\b\b\b"), ("start", "A ")):
            begin = time.perf_counter()
            type_keys(app, window, meter, keys, where)
            phases[f"typing at the {where} ({len(keys)} keys)"] = time.perf_counter() - begin
        meter.stop()
        label, worst = meter.worst()
        print(f"longest stall {ms(worst)} at: {label}")
        for name, gap in sorted(meter.longest.items(), key=lambda kv: -kv[1])[:8]:
            print(f"    {name:<60} {ms(gap)}")
        print(meter.sampler.cpu_report())
        print(meter.sampler.report())
        print("phases: " + "; ".join(f"{name} {ms(took)}" for name, took in phases.items()))
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
