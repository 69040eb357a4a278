"""The encoder–decoder window's screenshots in docs/encoder-decoder.md: the window driven into
one state and grabbed into a PNG after `--wait` seconds (on a display, or offscreen with
QT_QPA_PLATFORM=offscreen); 1366×768 unless --small (1280×720).

    PYTHONPATH=desktop python tests/make_encdec_screenshots.py MODEL MODE SOURCE OUT.png [--wait S] [--small]

MODE: translate | prov (translate, then Alt-click the alignment at layer 1, head 1) | compare
(Compare (encoder) with three 'bank' sources) | interventions:STACK,LAYER,HEAD[:nopos]...
(translate, then ablate those heads, and remove the source's positions) | stage:SECTION:KEY."""
from __future__ import annotations

import argparse
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from transformer_stepper.ui.seq2seq.window import TranslationWindow

COMPARED = ("the old man saw the red bank near the river .\nthe clerk saw the money near the bank .\n"
            "the farmer found the boat near the bank .")


def later(ms: int, function) -> None:
    QTimer.singleShot(ms, function)


def drive(window: TranslationWindow, mode: str) -> None:
    if window.trace is None:
        later(300, lambda: drive(window, mode))
        return
    if mode in ("translate", "prov") or mode.startswith("interventions"):
        window.translate()
    if mode == "prov":
        def explain() -> None:
            window.layer_box.setValue(1)
            window.head_box.setValue(1)
            later(1500, lambda: window.cross_view._explain("cross_attn_weights", 3, 4))
        later(3000, explain)
    elif mode.startswith("interventions"):
        def intervene() -> None:
            window.open_cell("", "interventions", None, None)
            panel = window.interventions_panel
            for spec in mode.split(":")[1:]:
                if spec == "nopos":
                    panel.no_positions.setChecked(True)
                else:
                    stack, layer, head = spec.split(",")
                    panel.add_head(stack, int(layer), int(head))
        later(2500, intervene)
    elif mode == "compare":
        def compare() -> None:
            window.open_cell("", "compare", None, None)
            view = window.compare_page.view
            view.word_box.setText("bank")
            view.editor.setPlainText(COMPARED)
            view.state.set_word("bank", immediate=True)
        later(1500, compare)
    elif mode.startswith("stage"):
        _, section, key = mode.split(":")
        later(1500, lambda: window.open_cell(section, key, None, None))


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("model", "mode", "source", "out"):
        parser.add_argument(name)
    parser.add_argument("--wait", type=float, default=20.0)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    app = QApplication(sys.argv[:1])
    window = TranslationWindow(args.source)
    if args.small:
        window.move(0, 0)
        window.resize(1280, 690)
        window.show()
    else:
        window.resize(1366, 740)
        window.showMaximized()
    window.open_model(args.model)
    later(500, lambda: drive(window, args.mode))

    def grab() -> None:
        window.grab().save(args.out)
        window.close()
        app.quit()

    later(int(args.wait * 1000), grab)
    app.exec()


if __name__ == "__main__":
    main()
