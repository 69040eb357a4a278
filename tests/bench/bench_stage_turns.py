"""The GUI thread's CPU per event-loop piece when stages are first visited: the set_stage call
itself (the turn that shows the view) and each turn of the frame scheduler after it (building
the view a figure per turn, its colour bars, its figures' repaints), on a model's layer 0 after a
text of --tokens tokens. CPU time of the GUI thread (time.thread_time), so a loaded machine
changes it less than a stall's wall time.

    python tests/bench/bench_stage_turns.py MODEL [--stages qkv,output_projection] [--tokens 32]

A wide synthetic model (d_model 4096, d_ff 14,336, one layer) shows the real-size stage
views' costs in a second instead of an 8B file's minutes."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtCore import QSettings  # noqa: E402

from bench_big import cpu_name  # noqa: E402
from bench_ui import text_of, wait_for  # noqa: E402

from transformer_stepper.state import frames  # noqa: E402
from transformer_stepper.ui.app import application, create_main_window  # noqa: E402

TURNS: list[tuple[float, str]] = []
_run_turn = frames.FrameScheduler.run_turn


def _timed_turn(self) -> None:
    task = self._next_task()
    begin = time.thread_time()
    _run_turn(self)
    TURNS.append((time.thread_time() - begin, str(task.key[0] if isinstance(task.key, tuple) else task.key)
                  if task is not None else "-"))


frames.FrameScheduler.run_turn = _timed_turn      # (before the window makes its scheduler)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--stages", default="qkv,weighted_sum,output_projection,feed_forward,layer_output")
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    app = application()
    print(f"CPU: {cpu_name()}; load {os.getloadavg()[0]:.1f}; {args.model}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        window = create_main_window(args.model, "the", QSettings(f"{tmp}/s.ini", QSettings.Format.IniFormat))
        window.resize(1366, 740)
        window.show()
        session, stepper = window.session, window.stepper
        wait_for(app, lambda: session.trace is not None and not session.busy, 3600)
        session.set_text(text_of(session.model, args.tokens), immediate=True)
        wait_for(app, lambda: session.trace is not None and session.trace.text != "the" and not session.busy
                 and stepper.settled(), 3600)
        session.set_layer(0)
        for key in args.stages.split(","):
            TURNS.clear()
            begin = time.thread_time()
            session.set_stage(key)
            shown = time.thread_time() - begin
            # the visit's own work: the view built, drawn and painted, its colour bars made (not
            # the idle builder's or the next stage's, which come after)
            view = stepper.views[key]
            wait_for(app, lambda: stepper.settled() and all(f.finished for _, f in view.figures()), 3600)
            longest = sorted(TURNS, reverse=True)[:3]
            print(f"{key:<18} showing it {1000 * shown:4.0f} ms; then {len(TURNS)} turns, "
                  f"{1000 * sum(t for t, _ in TURNS):4.0f} ms in all, longest "
                  + ", ".join(f"{1000 * t:.0f} ms ({name})" for t, name in longest), flush=True)
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
