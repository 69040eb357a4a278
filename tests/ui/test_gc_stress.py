"""The export deadlock's cause, gone (issue 25): the garbage collector stays on during an export,
and many exports and traces, with gc.collect() forced from another thread all the while, end
without a deadlock. In a subprocess with a timeout, so a deadlock fails the test instead of
hanging the suite; and a view, once closed, is freed by reference counting alone (no cycle
through its provenance click hooks)."""
import gc
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

from transformer_stepper.ui.stages import VIEWS, create_view

ROOT = Path(__file__).resolve().parents[2]


def test_closed_views_are_freed_without_the_cycle_collector(qtbot, open_session):
    session = open_session("gpt2")
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for key in VIEWS:
            view = create_view(key, session)
            ref = weakref.ref(view)
            view.close()
            view.setParent(None)
            del view
            assert ref() is None, f"{key}: the closed view is kept alive by a reference cycle"
    finally:
        if was:
            gc.enable()


def test_exports_and_traces_under_gc_pressure_collect_only_on_the_gui_thread(tmp_path, model_paths):
    # Many exports on the GUI thread while a worker traces and makes cyclic garbage (which,
    # with Python's automatic collector, would start collections in the worker: the deadlock
    # of the last round), and a timer forcing full collections on the GUI thread every few
    # milliseconds. Every collection must run on the GUI thread, none may deadlock (timeout),
    # and every file must be written.
    script = textwrap.dedent(f"""
        import gc, threading, time
        from pathlib import Path
        from transformer_stepper.ui.offscreen import ensure_application
        app = ensure_application()
        from PySide6.QtCore import QTimer
        from transformer_stepper import load_model
        from transformer_stepper.core.model import stages
        from transformer_stepper.ui.export.job import ExportJob
        from transformer_stepper.ui.export.render import ExportOptions
        from transformer_stepper.ui.export.snapshot import SnapshotSession

        main = threading.get_ident()
        where = []
        gc.callbacks.append(lambda phase, info: phase == "start" and where.append(threading.get_ident()))
        gc.set_threshold(50, 2, 2)                 # automatic collections would be constant
        model = load_model({str(model_paths["gpt2"])!r})
        # what exists now (modules, Qt's wrappers, the model) is never garbage: frozen out of the
        # collections, which then walk only what the exports and the worker make (the objects
        # the deadlock was about) and are cheap enough to come every few milliseconds
        gc.freeze()
        stop = False

        def work():
            while not stop:
                model.trace("the bank of the river and the bank")
                for _ in range(200):               # cyclic garbage
                    a = []; a.append(a)

        forced = QTimer(); forced.timeout.connect(gc.collect); forced.start(5)
        worker = threading.Thread(target=work)
        worker.start()
        written = 0
        try:
            for round in range(3):
                folder = Path({str(tmp_path)!r}) / str(round)
                folder.mkdir()
                session = SnapshotSession(model, model.trace("the bank of the river"), layer=round % 2)
                job = ExportJob(session, folder, [s.key for s in stages.STAGES], ExportOptions(format="png"))
                written += len(job.run())
                job.deleteLater()
                session.deleteLater()
        finally:
            stop = True
            worker.join()
        forced.stop()
        off_thread = sum(1 for ident in where if ident != main)
        print("collections", len(where), "off_thread", off_thread, "written", written)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "desktop"), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], capture_output=True,
                          text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    words = done.stdout.split()
    collections, off_thread, written = int(words[1]), int(words[3]), int(words[5])
    assert collections > 100 and off_thread == 0
    assert written == 3 * len(list((tmp_path / "0").iterdir())) and written > 0
