"""The window on an 8B-shaped GGUF (tests/bench/make_real_size.py): a text of --tokens tokens
traced and drawn, every stage of a middle layer shown, a word typed at the end (key by key),
five tokens generated; each phase's time and the longest event-loop stall of each (a gap
between the ticks of a 2 ms timer: ui/stall_meter.py) with the GUI thread's own CPU time in its
longest gap (on a loaded machine a gap is mostly waiting for a core), and the peak RssAnon.

    DISPLAY=:91 QT_QPA_PLATFORM=xcb python tests/bench/bench_real_size_gui.py FILE.gguf
        [--tokens 32] [--layer 15] [--shots DIR] [--profile-gaps MS]

Offscreen by default; under Xvfb with a window manager for a real window system. --shots
saves a screenshot of the window after each phase. --profile-gaps MS profiles the GUI thread
(gap_profiler.py) and prints what it computed in each turn that took over MS ms of its CPU."""
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
from bench_stall_big import Meters, traced_and_drawn, type_keys, ms  # noqa: E402
from bench_ui import text_of, wait_for  # noqa: E402
from gap_profiler import GapProfiler  # noqa: E402
from memory import peak_rss_anon, rss_anon  # noqa: E402

from transformer_stepper.core.model.stages import available_stages  # noqa: E402
from transformer_stepper.ui.app import application, create_main_window  # noqa: E402

TIMEOUT = 3600


class Marker:
    """type_keys's meter: its marks go to the stall meter and the profiler."""
    def __init__(self, mark) -> None:
        self.mark = mark


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--shots", type=Path)
    parser.add_argument("--profile-gaps", type=float, metavar="MS",
                        help="profile the GUI thread; print its turns over MS ms of CPU")
    args = parser.parse_args()
    app = application()
    print(f"CPU: {cpu_name()}; platform {os.environ['QT_QPA_PLATFORM']}; load {os.getloadavg()[0]:.1f}; "
          f"{args.model}", flush=True)
    base = rss_anon()
    phases: list[tuple[str, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp, peak_rss_anon() as peak:
        start = time.perf_counter()
        window = create_main_window(args.model, "the", QSettings(f"{tmp}/s.ini", QSettings.Format.IniFormat))
        window.resize(1366, 740)
        window.show()
        session = window.session
        wait_for(app, lambda: session.trace is not None and not session.busy, TIMEOUT)
        print(f"opened and traced 'the' in {time.perf_counter() - start:.1f} s", flush=True)
        text = text_of(session.model, args.tokens)
        meters = Meters(stacks=False)
        profiler = GapProfiler(args.profile_gaps / 1000) if args.profile_gaps else None
        meters.start()
        if profiler is not None:
            profiler.start()

        def mark(label):
            meters.mark(label)
            if profiler is not None:
                profiler.label = label

        def phase(name, run):
            meters.meter.longest.clear()
            meters.meter.longest_cpu.clear()
            mark(name)
            begin = time.perf_counter()
            run()
            took = time.perf_counter() - begin
            worst = max(meters.meter.longest.values(), default=0.0)
            worst_cpu = max(meters.meter.longest_cpu.values(), default=0.0)
            phases.append((name, took, worst, worst_cpu))
            print(f"{name}: {took:.1f} s, longest stall {ms(worst)} (GUI thread's own CPU in a gap at most "
                  f"{ms(worst_cpu)}); load {os.getloadavg()[0]:.1f}", flush=True)
            for label, gap in sorted(meters.meter.longest.items(), key=lambda kv: -kv[1])[:3]:
                print(f"    {label:<60} {ms(gap)} (GUI CPU {ms(meters.meter.longest_cpu.get(label, 0.0))})")
            if args.shots:
                args.shots.mkdir(parents=True, exist_ok=True)
                window.grab().save(str(args.shots / f"{len(phases)}.png"))

        def first_view():
            session.set_text(text, immediate=True)
            traced_and_drawn(app, window)

        def every_stage():
            session.set_layer(args.layer)
            for stage in available_stages(session.model.config):
                if stage.per_layer:
                    mark(f"stage {stage.key} of layer {args.layer}")
                    session.set_stage(stage.key)
                    traced_and_drawn(app, window)

        def generate():
            before = session.trace.n_seq
            session.generation.generate(5)
            wait_for(app, lambda: session.trace.n_seq >= before + 5 and not session.generation.running, TIMEOUT)
            traced_and_drawn(app, window)

        phase(f"first view, {args.tokens} tokens", first_view)
        print(f"{session.trace.n_seq} tokens; {session.model.config.n_layer} layers", flush=True)
        phase(f"every stage of layer {args.layer}", every_stage)
        phase("a word typed at the end (' river', key by key)", lambda: type_keys(app, window, Marker(mark), " river", "end"))
        phase("five tokens generated", generate)
        meters.stop()
        if profiler is not None:
            profiler.stop()
            print(profiler.report(), flush=True)
        window.close()
    print(f"peak RssAnon {(peak() - base) / 1e9:.2f} GB")
    for name, took, worst, worst_cpu in phases:
        print(f"  {name:<50} {took:8.1f} s   longest stall {ms(worst)} (its GUI-thread CPU {ms(worst_cpu)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
