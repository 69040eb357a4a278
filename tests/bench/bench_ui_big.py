"""The window on a big model (e.g. the GPT-2-small-shaped one from make_big_models.py) and a
long text: keystroke -> plots updated on a few stages, then every stage visited, with the
process's anonymous resident memory (RssAnon: weights that stay memory-mapped do not count)
after opening, after one trace and at its peak over the visits.

    python tests/bench/bench_ui_big.py MODEL_DIR [--tokens 1000] [--detail-budget-mib MIB]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from bench_big import cpu_name  # noqa: E402
from bench_ui import text_of, wait_for  # noqa: E402
from memory import peak_rss_anon, rss_anon  # noqa: E402

from transformer_stepper.ui.app import application, create_main_window  # noqa: E402
from transformer_stepper.state.jobs import compute_trace  # noqa: E402
from transformer_stepper.ui.settings.detail_budget import KEY as DETAIL_BUDGET_KEY  # noqa: E402

STAGES = ("softmax", "layer_output", "qkv")
MiB = 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--detail-budget-mib", type=int, help="View → Detail Budget (default: the app's)")
    args = parser.parse_args()
    app = application()
    print(f"CPU: {cpu_name()}; platform {os.environ['QT_QPA_PLATFORM']}; {args.model}; "
          f"load {os.getloadavg()[0]:.1f}; detail budget {args.detail_budget_mib or 'default'} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        start = rss_anon()
        settings = QSettings(f"{tmp}/s.ini", QSettings.Format.IniFormat)
        if args.detail_budget_mib is not None:
            settings.setValue(DETAIL_BUDGET_KEY, args.detail_budget_mib)
        window = create_main_window(args.model, "the", settings)
        window.resize(1500, 900)
        window.show()
        session = window.session
        wait_for(app, lambda: session.trace is not None and not session.busy, 600)
        opened = rss_anon()
        session.set_text(text_of(session.model, args.tokens), immediate=True)
        wait_for(app, lambda: session.trace.text == session.text and not session.busy, 600)
        traced = rss_anon()
        print(f"{session.trace.n_seq} tokens; RssAnon: {(opened - start) / MiB:,.0f} MiB after "
              f"opening, {(traced - start) / MiB:,.0f} MiB with one trace")
        for key in STAGES:
            session.set_stage(key)
            view = window.stepper.current_view()
            wait_for(app, view.is_current, 600)
            totals = []
            for i in range(2):
                updated = []
                view.updated.connect(lambda: updated.append(time.perf_counter()))
                window.stepper.text_box.setFocus()
                begin = time.perf_counter()
                QTest.keyClick(window.stepper.text_box, "s" if i % 2 == 0 else "\b")
                wait_for(app, lambda: bool(updated) and session.trace.text == window.stepper.text_box.text()
                         and window.stepper.settled(), 600)          # (the figures paint in turns)
                window.repaint()
                totals.append(time.perf_counter() - begin)
                view.updated.disconnect()
            print(f"keystroke at the end -> plots updated, {key:<14} "
                  f"{1000 * statistics.median(totals):8.0f} ms (pass {1000 * session.compute_seconds:.0f} ms, "
                  f"{session.trace.computed_rows} positions computed)")
        # typing at the beginning: a decoder shares no position with the old text (full pass)
        updated = []
        view.updated.connect(lambda: updated.append(time.perf_counter()))
        begin = time.perf_counter()
        with peak_rss_anon() as typing_peak:
            session.set_text("A " + session.text, immediate=True)
            wait_for(app, lambda: bool(updated) and session.trace.text == session.text and not session.busy, 600)
            window.repaint()
            took = time.perf_counter() - begin
            wait_for(app, lambda: session.workers.idle, 600)     # the next layer, prepared
        view.updated.disconnect()
        print(f"keystroke at the start -> plots updated, {key:<14} "
              f"{1000 * took:8.0f} ms (pass {1000 * session.compute_seconds:.0f} ms, "
              f"{session.trace.computed_rows} positions computed); peak RssAnon meanwhile "
              f"{(typing_peak() - start) / MiB:,.0f} MiB (the old trace and the new)")
        idle_until = time.perf_counter() + 1.5   # the window returns freed memory once idle
        while time.perf_counter() < idle_until:
            app.processEvents()
            time.sleep(0.01)
        with peak_rss_anon() as peak:
            for stage in session.available_stages():
                session.set_stage(stage.key)
                wait_for(app, window.stepper.current_view().is_current, 600)
        held = session.trace_memory()
        print(f"every stage visited: peak RssAnon {(peak() - start) / MiB:,.0f} MiB "
              f"({(peak() - start) / max(traced - start, 1):.2f}x RssAnon after one trace, "
              f"{(peak() - start) / held:.2f}x the {held / MiB:,.0f} MiB the trace now holds)")
        session.set_stage("tokenize")    # a view that computes nothing more (the lens would)
        wait_for(app, window.stepper.current_view().is_current, 600)
        workers = []
        base = session.text
        system = resource.getrusage(resource.RUSAGE_SELF).ru_stime
        for i in range(4):       # whole passes in the worker (the first token changes), the window idle
            session.set_text(("x " if i % 2 == 0 else "") + base, immediate=True)
            wait_for(app, lambda: session.trace.text == session.text and not session.busy, 600)
            assert session.trace.computed_rows == session.trace.n_seq
            workers.append(session.compute_seconds)
            wait_for(app, lambda: session.workers.idle, 600)
        system = (resource.getrusage(resource.RUSAGE_SELF).ru_stime - system) / 4
        print(f"system time per whole text (pass, next layer, freed memory returned): {1000 * system:,.0f} ms")
        text = session.text
        alone = []
        for _ in range(3):       # the worker's function on this thread, no event loop running
            alone.append(compute_trace(session.model, text).seconds)
        print(f"forward pass in the window's worker {1000 * statistics.median(workers):,.0f} ms, "
              f"alone {1000 * statistics.median(alone):,.0f} ms: "
              f"{statistics.median(workers) / statistics.median(alone):.2f}x")
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
