"""The screenshots of two encoder–decoders side by side in docs/model-diff.md: the built-in
translator (A) against a copy of it whose weights are rounded to 4 bits in blocks of 16 along
each row (Q4_0's scheme, whose blocks are 32: a scale per block, the entry of largest |w| / −8,
and round(w / scale) in −8…7; 16 because the translator's rows are 48 long; done here in numpy,
standing in for a quantized copy), on its example sentence translated to the end. Each mode is
one window state, grabbed into a PNG after the work it waits for; 1366×768 (the window at
1366×740) unless --small (1280×720: the window at 1280×690).

    PYTHONPATH=desktop python tests/make_two_translators_screenshots.py MODE OUT.png [--small]

MODE: page (the Two models page) | heads (its cross-attention per head) | cross (the
Cross-attention in A − B, decoder layer 1, head 1) | provenance (cross, then Alt-click the
head output of the last target position, dimension 3) | stage:SECTION:KEY (that stage in A − B,
layer 1, head 1)."""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from transformer_stepper.io.resources import builtin_translator_dir
from transformer_stepper.ui.seq2seq.opener import example_source
from transformer_stepper.ui.seq2seq.window import TranslationWindow

BLOCK = 16


def q4_0_rounded(values: np.ndarray) -> np.ndarray:
    """Q4_0's rounding, in blocks of 16, of a float matrix whose rows are a multiple of 16 long;
    others (vectors) as they are."""
    if values.ndim != 2 or values.shape[1] % BLOCK:
        return values
    blocks = values.astype(np.float32).reshape(-1, BLOCK)
    extreme = blocks[np.arange(len(blocks)), np.argmax(np.abs(blocks), axis=1)]
    scale = extreme / -8.0
    safe = np.where(scale == 0, 1.0, scale)
    q = np.clip(np.round(blocks / safe[:, None]), -8, 7)
    return (q * scale[:, None]).reshape(values.shape).astype(values.dtype)


def rounded_copy(out: Path) -> Path:
    from safetensors.numpy import load_file, save_file

    folder = builtin_translator_dir()
    tensors = load_file(str(folder / "model.safetensors"))
    save_file({k: q4_0_rounded(v) if v.dtype.kind == "f" else v for k, v in tensors.items()},
              str(out / "model.safetensors"))
    for item in folder.iterdir():
        if item.is_file() and item.name != "model.safetensors":
            shutil.copy(item, out / item.name)
    return out


def later(ms: int, function) -> None:
    QTimer.singleShot(ms, function)


def when(condition, then, tries: int = 600) -> None:
    if condition() or tries <= 0:
        then()
    else:
        later(100, lambda: when(condition, then, tries - 1))


def drive(window: TranslationWindow, mode: str, other: str, done) -> None:
    def compared() -> None:
        window.compare_with(other)
        when(lambda: window.two.result is not None or bool(window.two.message), shown)

    def shown() -> None:
        if window.two.message:
            print(window.two.message, file=sys.stderr)
        if mode == "page":
            later(800, done)
        elif mode == "heads":
            window.two_page.details.setCurrentIndex(1)
            later(800, done)
        elif mode in ("cross", "provenance"):
            window.difference_box.setChecked(True)
            window.open_cell("Decoder", "cross_attention", 1, 1)
            if mode == "cross":
                later(2500, done)
            else:
                later(2500, lambda: (window.cross_difference.explain_cell(
                    "cross_head_outputs", window.trace.decoder.n_seq - 1, 3), later(1500, done)))
        elif mode.startswith("stage:"):
            _, section, key = mode.split(":")
            window.difference_box.setChecked(True)
            window.open_cell(section, key, 1, 1)
            later(3000, done)

    window.translate_when_open = True
    when(lambda: window.trace is not None and window.target_generated, lambda: later(500, compared))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("out")
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    app = QApplication(sys.argv[:1])
    folder = builtin_translator_dir()
    window = TranslationWindow(example_source(str(folder)))
    window.move(0, 0)
    window.resize(*((1280, 690) if args.small else (1366, 740)))
    window.show()
    with tempfile.TemporaryDirectory() as temporary:
        other = Path(temporary) / "translator-4bit-blocks"
        other.mkdir()
        rounded_copy(other)

        def grab() -> None:
            window.grab().save(args.out)
            window.close()
            app.quit()

        window.open_model(str(folder))
        drive(window, args.mode, str(other), grab)
        app.exec()


if __name__ == "__main__":
    main()
