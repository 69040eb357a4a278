"""The logit lens view on a big model and a long text, in a 1366×768 window: time from showing
the stage to its first screenful (the view drawn: the table's column window and the selected
position's curve), and to the whole lens, as the app shows it and in the core alone; then the same after one keystroke at the end of the
text (a retrace sharing every earlier position). Each code base in its own process:

    python tests/bench/bench_lens.py MODEL_DIR [--tokens 1000] [--before /work/main/desktop]

runs this worktree's desktop/ ("after") and the --before one (e.g. main's) on the same model.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
AFTER = HERE.parents[1] / "desktop"
LAPTOP = (1366, 768)


def child(model_dir: str, n_tokens: int) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(HERE))
    import tempfile

    from PySide6.QtCore import QSettings
    from PySide6.QtTest import QTest

    from bench_ui import text_of, wait_for
    from transformer_stepper.core.trace.generate import cached_lens
    from transformer_stepper.ui.app import application, create_main_window

    app = application()
    with tempfile.TemporaryDirectory() as tmp:
        window = create_main_window(model_dir, "the", QSettings(f"{tmp}/s.ini", QSettings.Format.IniFormat))
        window.resize(*LAPTOP)
        window.show()
        session = window.session
        wait_for(app, lambda: session.trace is not None and not session.busy, 600)
        session.set_text(text_of(session.model, n_tokens), immediate=True)
        wait_for(app, lambda: session.trace.text == session.text and not session.busy, 600)
        for what in ("shown", "keystroke"):
            begin = time.perf_counter()
            if what == "shown":
                session.set_stage("logit_lens")
            else:
                window.stepper.text_box.setFocus()
                QTest.keyClick(window.stepper.text_box, "s")
                wait_for(app, lambda: session.trace.text == window.stepper.text_box.text(), 600)
            view = window.stepper.current_view()
            wait_for(app, lambda: view.is_current() and window.stepper.settled(), 600)
            window.repaint()
            first = time.perf_counter() - begin
            shown = view.table.column_window()
            blocks = _blocks_computed(session.trace)
            wait_for(app, lambda: cached_lens(session.trace) is not None, 600)
            whole = time.perf_counter() - begin
            wait_for(app, lambda: session.workers.idle, 600)
            print(f"  {what:<9} first screenful {first:6.2f} s (positions {shown[0]}–"
                  f"{shown[0] + shown[1] - 1} of {shown[2]}, selected {session.selected_token}{blocks}); "
                  f"whole lens {whole:6.2f} s; load average {os.getloadavg()[0]:.1f}", flush=True)
        window.close()


def core(model_dir: str, n_tokens: int, columns: int) -> None:
    """The lens's arithmetic alone (no window): the first screenful's blocks (the last
    `columns` positions, the selected last one among them), the whole lens; then the whole
    lens of the text extended by one token (Model.extend, as a generation step)."""
    sys.path.insert(0, str(HERE))
    from bench_ui import text_of
    from transformer_stepper import load_model
    from transformer_stepper.core.trace.generate import lens

    model = load_model(model_dir)
    trace = model.trace(text_of(model, n_tokens))
    trace.hidden_states                           # (stacked once per trace, by either code)
    begin = time.perf_counter()
    try:
        from transformer_stepper.core.trace.lens_blocks import trace_lens
    except ImportError:                           # before: the view waits for the whole lens
        lens(model, trace, 5)
        first = whole = time.perf_counter() - begin
    else:
        cache = trace_lens(model, trace, 5)
        shown = cache.blocks_of(trace.n_seq - columns, columns)
        cache.compute(cache.missing(range(cache.n_states), shown))
        first = time.perf_counter() - begin
        cache.compute(cache.everything())
        whole = time.perf_counter() - begin
    longer = model.extend(trace, [int(trace.input_ids[-1])])
    longer.hidden_states
    begin = time.perf_counter()
    lens(model, longer, 5)
    extended = time.perf_counter() - begin
    print(f"  core      first screenful {first:6.2f} s (the last {columns} positions); whole lens "
          f"{whole:6.2f} s; extended by a token: whole lens {extended:6.2f} s; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)


def _blocks_computed(trace) -> str:
    """', N of M (state, block) pairs computed (R reused)' where the code has lens blocks."""
    try:
        from transformer_stepper.core.trace.lens_blocks import cached_trace_lens
    except ImportError:                  # before: the lens is computed whole
        return ""
    cache = cached_trace_lens(trace)
    return (f", {len(cache.blocks)} of {cache.n_states * cache.n_blocks} (state, block) pairs "
            f"computed, {cache.reused} reused")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--before", default="/work/main/desktop")
    parser.add_argument("--columns", type=int, default=7,
                        help="positions the 1366×768 table shows (for the core figures)")
    parser.add_argument("--child", choices=("ui", "core"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "ui":
        child(args.model, args.tokens)
        return 0
    if args.child == "core":
        core(args.model, args.tokens, args.columns)
        return 0
    sys.path.insert(0, str(HERE))
    from bench_big import cpu_name

    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; {args.model}, {args.tokens} tokens, "
          f"window {LAPTOP[0]}×{LAPTOP[1]}")
    for name, desktop in (("before", args.before), ("after", str(AFTER))):
        print(f"{name} ({desktop}):", flush=True)
        env = dict(os.environ, PYTHONPATH=desktop)
        for what in ("core", "ui"):
            subprocess.run([sys.executable, __file__, args.model, "--tokens", str(args.tokens),
                            "--columns", str(args.columns), "--child", what], env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
