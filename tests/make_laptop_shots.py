"""Screenshots of every view at a laptop's screen size, taken on a real X display with a window
manager: `DISPLAY=:NN python tests/make_laptop_shots.py OUT_DIR [--few]` (Xvfb -screen 0
1366x768x24 and openbox, say). Every tab, every stage of layer 0 (one per row of the stage list),
the Questions dock on its list and on a walk's step, the Provenance dock with a value explained,
the Dequantization dock on a GGUF file, MiniLM's position addition (TS_MINILM_DIR) and the
translator; --few takes a handful (for other screen sizes). The shots are of the whole screen,
window frame included."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from PySide6.QtCore import QEventLoop, QSettings, QTimer

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def wait(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def wait_for(signal, ms: int = 20_000) -> None:
    loop = QEventLoop()
    signal.connect(loop.quit)
    QTimer.singleShot(ms, loop.quit)
    loop.exec()
    signal.disconnect(loop.quit)


def main(out: Path, few: bool) -> None:
    from transformer_stepper.core.model import stages
    from transformer_stepper.ui.app import application
    from transformer_stepper.ui.main_window import MainWindow
    from transformer_stepper.ui.session import Session
    from transformer_stepper.ui.tabs import TABS

    app = application()
    out.mkdir(parents=True, exist_ok=True)
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "settings.ini"), QSettings.Format.IniFormat)
    session = Session()
    window = MainWindow(session, settings)
    session.setParent(window)
    window.show()

    def shot(name: str, settle: int = 700) -> None:
        wait(settle)
        app.primaryScreen().grabWindow(0).save(str(out / f"{name}.png"))
        print(out / f"{name}.png", flush=True)

    window.open_model(None)
    wait_for(session.traceChanged)
    shot("tab-1-stepper", 1500)
    for number, tab in enumerate(TABS[1:], start=2):
        if few and tab.key not in ("compare", "training"):
            continue
        window.tabs.show_tab(tab.key)
        shot(f"tab-{number}-{tab.key}", 2500 if tab.key == "positions" else 1200)
    window.tabs.show_tab("stepper")
    for stage in stages.STAGES:
        if few and stage.key not in ("position_addition", "softmax"):
            continue
        session.set_stage(stage.key)
        shot(f"stage-{stage.number:02d}-{stage.key}")
    window.walk_panel.show_list()
    shot("dock-questions-list")
    walk = [w.key for w in window.walk_panel.walks].index("03-one-word-many-embeddings")
    window.walk_panel.start(walk)
    wait(1500)
    window.walk_panel.next()
    wait(1500)
    window.walk_panel.next()
    shot("dock-questions-walk3-step3", 2500)
    window.walk_panel.close()
    session.set_stage("softmax")
    session.request_provenance("attn_weights", (0, 0, 3, 1))
    shot("dock-provenance", 1200)
    if few:
        window.close()
        return
    window.open_model(str(FIXTURES / "gguf" / "llama_small.Q4_0.gguf"))
    wait_for(session.traceChanged)
    session.set_stage("qkv")
    session.request_dequantization("h.0.attn.q.w")
    shot("dock-dequantization-and-provenance", 1500)
    window.provenance_dock.close()
    window.dequantization_dock.close()
    minilm = os.environ.get("TS_MINILM_DIR")
    if minilm:
        window.open_model(minilm)
        wait_for(session.traceChanged)
        session.set_stage("position_addition")
        shot("minilm-position-addition", 1500)
        window.walk_panel.show_list()
        window.tabs.show_tab("compare")
        shot("minilm-compare-with-questions", 2500)
        window.walk_panel.close()
    window.open_builtin_translator()
    wait(4000)
    for translator in window.translations.windows:
        translator.raise_()
    shot("translator", 1000)
    window.translations.close_all()
    window.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--few" in sys.argv)
