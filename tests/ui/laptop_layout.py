"""Visit every view of the app on one screen size and report what does not fit: run as
`python -m tests.ui.laptop_layout WIDTH HEIGHT` (the offscreen platform given a screen of that
size; QT_SCALE_FACTOR applies as usual). It opens the built-in model, visits every tab and every
stage of layer 0, opens the Questions (a walk's first step), Provenance and Dequantization docks
(a GGUF file) and the translator, then an encoder (the BERT fixture) and a mixture of experts
(DeepSeek-V2's fixture) and their stages, and after
each visit checks that the window's frame and minimum size fit the screen's available area and
that every plot shown keeps a legible view box. Prints one JSON object: the screen, the visits,
and the problems (empty when everything fits). tests/ui/test_laptop_layout.py runs it."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEGIBLE = (145, 105)         # px: a view box of about 150 x 110, two pixels of rounding either way


def configure_screen(width: int, height: int) -> str:
    """The offscreen platform with one screen of width x height (set before Qt starts)."""
    config = Path(tempfile.mkdtemp()) / "screen.json"
    config.write_text(json.dumps({"screens": [{"name": "laptop", "x": 0, "y": 0, "width": width,
                                               "height": height, "logicalDpi": 96,
                                               "logicalBaseDpi": 96, "dpr": 1}]}))
    os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={config}"
    return str(config)


class Checker:
    def __init__(self, app, window) -> None:
        self.app, self.window = app, window
        self.problems: list[str] = []
        self.visits = 0

    def settle(self, ms: int = 60) -> None:
        from PySide6.QtCore import QEventLoop, QTimer

        for _ in range(2):          # layouts, then the figures' legible minimums, then layouts
            loop = QEventLoop()
            QTimer.singleShot(ms, loop.quit)
            loop.exec()

    def wait_for(self, signal, ms: int = 15_000) -> None:
        from PySide6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        signal.connect(loop.quit)
        QTimer.singleShot(ms, loop.quit)
        loop.exec()
        signal.disconnect(loop.quit)

    def check(self, where: str, top=None) -> None:
        """The problems of this view, once they persist: layouts and the figures' legible
        minimums settle over a few turns of the event loop (more on a loaded machine)."""
        self.visits += 1
        found: list[str] = []
        for _ in range(8):
            self.settle()
            found = self._problems(where, top or self.window)
            if not found:
                return
        self.problems.extend(found)

    def _problems(self, where: str, top) -> list[str]:
        from PySide6.QtWidgets import QToolBar, QToolButton

        from transformer_stepper.ui.plots.figure import Figure

        problems: list[str] = []
        available = top.screen().availableGeometry()
        frame = top.frameGeometry()
        if not available.contains(frame):
            problems.append(f"{where}: frame {frame.getRect()} outside {available.getRect()}")
        for name, size in (("minimum size", top.minimumSize()), ("minimum size hint", top.minimumSizeHint())):
            if size.width() > available.width() or size.height() > available.height():
                problems.append(f"{where}: {name} {size.width()}x{size.height()} > "
                                f"{available.width()}x{available.height()}")
        for bar in top.findChildren(QToolBar):     # a toolbar too long shows its '»' overflow
            extension = bar.findChild(QToolButton, "qt_toolbar_ext_button")
            if bar.isVisible() and extension is not None and extension.isVisible():
                problems.append(f"{where}: the toolbar '{bar.windowTitle()}' overflows into '»'")
        for figure in top.findChildren(Figure):
            if not figure.isVisible():
                continue
            box = figure.plot.vb.sceneBoundingRect()
            if box.width() < LEGIBLE[0] or box.height() < LEGIBLE[1]:
                problems.append(f"{where}: plot '{figure.title}' view box "
                                f"{box.width():.0f}x{box.height():.0f}")
            cut = beyond_scrolling(figure)
            if cut:
                problems.append(f"{where}: plot '{figure.title}' {cut}")
        return problems


def beyond_scrolling(widget) -> str:
    """'' when all of `widget` lies inside what its nearest scroll area scrolls over (so
    scrolling reaches it); else how far it runs past that content's bottom or right edge (a
    layout taller than the minimum it told the widgets above: its last figures unreachable)."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QScrollArea

    area = widget.parentWidget()
    while area is not None and not isinstance(area, QScrollArea):
        area = area.parentWidget()
    if area is None or area.widget() is None:
        return ""
    content = area.widget()
    corner = widget.mapTo(content, QPoint(widget.width(), widget.height()))
    over = (corner.x() - content.width(), corner.y() - content.height())
    if max(over) > 2:
        return f"runs {max(over)} px past what its scroll area reaches"
    return ""


def visit_stages(checker: Checker, model: str) -> None:
    from transformer_stepper.core.model import stages

    window, session = checker.window, checker.window.session
    window.tabs.show_tab("stepper")
    session.set_layer(0)
    for stage in stages.STAGES:
        if stage.unavailable_because(session.model.config):
            continue
        session.set_stage(stage.key)
        checker.check(f"{model}, stage {stage.number} {stage.title}")


def open_model(checker: Checker, path) -> None:
    session = checker.window.session
    checker.window.open_model(None if path is None else str(path))
    checker.wait_for(session.traceChanged)
    if session.trace is None:
        checker.problems.append(f"{path}: no trace")


def run(width: int, height: int) -> dict:
    configure_screen(width, height)
    from PySide6.QtCore import QSettings

    from transformer_stepper.ui.app import application
    from transformer_stepper.ui.main_window import MainWindow
    from transformer_stepper.ui.session import Session
    from transformer_stepper.ui.tabs import TABS

    app = application()
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "settings.ini"), QSettings.Format.IniFormat)
    session = Session(debounce_ms=5)
    window = MainWindow(session, settings)
    session.setParent(window)
    window.show()
    checker = Checker(app, window)
    open_model(checker, None)
    checker.check("built-in, opened")
    for tab in TABS:
        window.tabs.show_tab(tab.key)
        checker.check(f"built-in, tab {tab.title}")
    visit_stages(checker, "built-in")
    # the docks: Questions with a walk's first step, Provenance with a value explained
    window.walk_panel.start(0)
    checker.settle(400)
    checker.check("built-in, Questions (walk 1, step 1)")
    session.set_stage("softmax")
    session.request_provenance("attn_weights", (0, 0, 1, 0))
    checker.check("built-in, Questions + Provenance")
    for tab in TABS:
        window.tabs.show_tab(tab.key)
        checker.check(f"built-in, tab {tab.title}, Questions + Provenance")
    # a GGUF file: the Dequantization dock too (every dock open)
    open_model(checker, FIXTURES / "gguf" / "llama_small.Q4_0.gguf")
    window.tabs.show_tab("stepper")
    session.set_stage("qkv")
    window.session.request_dequantization("h.0.attn.q.w")
    checker.settle(300)
    if not window.dequantization_dock.isVisible():
        checker.problems.append("the Dequantization dock did not open")
    checker.check("GGUF, every dock open")
    visit_stages(checker, "GGUF, every dock open")
    # an encoder
    open_model(checker, FIXTURES / "bert_tiny_mlm")
    visit_stages(checker, "BERT")
    # a mixture of experts with latent attention (the Router stage, the latent's figures, a
    # long first token)
    open_model(checker, FIXTURES / "deepseek_v2_tiny")
    visit_stages(checker, "DeepSeek-V2")
    # the translator's own window
    window.open_builtin_translator()
    checker.settle(1500)
    for translator in window.translations.windows:
        checker.check("translator", top=translator)
    screen = window.screen().availableGeometry()
    window.close()
    return {"screen": [screen.width(), screen.height()], "visits": checker.visits,
            "problems": checker.problems}


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]), int(sys.argv[2]))))
