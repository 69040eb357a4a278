"""A soak of random UI actions (the slow tier: `pytest --slow`): 1,000 actions on a GPT-2 and a
BERT model — typing, keys, stages, layers, heads, tokens, temperature, good and bad model files,
resizes, the plot menu's options and PNG exports of the plot under the mouse — fail on any
exception raised in the event loop (pytest-qt) or a dialog left naming an error for a good file.
Found: pyqtgraph's PlotItem.updateAlpha calling setAlpha on a BarGraphItem."""
from __future__ import annotations

import random

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt

from transformer_stepper.core.model import stages
from transformer_stepper.ui.export.menu import export_plot
from transformer_stepper.ui.export.render import ExportOptions
from transformer_stepper.ui.plots.figure import Figure
from transformer_stepper.ui.tabs import TABS

from .conftest import HF_FIXTURES

WORDS = "the queen bank river she he was tired money gold , . ! é 日本 zzqx".split()
ACTIONS = 1000


def _figures(window) -> list:
    return [f for f in window.findChildren(Figure) if f.isVisible()]


def _act(rng: random.Random, window, qtbot, tmp_path, models) -> None:
    session = window.session
    kind = rng.randrange(13)
    if kind == 0:
        words = rng.choices(WORDS, k=rng.randrange(0, 12))
        session.set_text(" ".join(words))
    elif kind == 1:
        qtbot.keyClick(window.stepper.stack, rng.choice([Qt.Key.Key_Left, Qt.Key.Key_Right]))
    elif kind == 2:
        key = rng.choice(stages.STAGES).key
        session.set_stage(key)
    elif kind == 3:
        session.set_layer(rng.randrange(-1, 4))
    elif kind == 4:
        session.set_head(rng.randrange(-1, 5))
    elif kind == 5 and session.trace is not None:
        session.select_token(rng.randrange(-1, session.trace.n_seq + 1))
    elif kind == 6:
        session.set_temperature(rng.choice([0.05, 0.5, 1.0, 2.0, 10.0]))
    elif kind == 7 and rng.random() < 0.08:              # a model: now and then, loads are slow
        window.open_model(str(rng.choice(models)))
    elif kind == 8:
        window.resize(rng.randrange(700, 1900), rng.randrange(500, 1100))
    elif kind == 9:
        window.tabs.show_tab(rng.choice(TABS).key)
    elif kind == 10 and (figures := _figures(window)):
        plot = rng.choice(figures).plot                   # the plot menu's options
        plot.ctrl.alphaGroup.setChecked(rng.random() < 0.5)
        plot.ctrl.alphaSlider.setValue(rng.randrange(0, 1000))
        plot.ctrl.fftCheck.setChecked(False)
        plot.restoreState(plot.saveState())
    elif kind == 11 and (figures := _figures(window)) and rng.random() < 0.2:
        figure = rng.choice(figures)
        export_plot(window, figure.figure, tmp_path / "soak.png",
                    ExportOptions(format="png", scale=rng.choice([1.0, 2.0])), figure.title)
    elif kind == 12:
        box, word = window.stepper.text_box, " " + rng.choice(WORDS)
        box.setFocus()
        if word.isascii():
            qtbot.keyClicks(box, word)               # (QTest types ASCII only)
        else:
            box.insert(word)
            box.textEdited.emit(box.text())
    qtbot.wait(rng.choice([0, 1, 5, 20]))


@pytest.mark.slow
def test_a_thousand_random_actions_raise_nothing(qtbot, loaded_window, model_paths, tmp_path):
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    window = loaded_window("gpt2")
    models = [model_paths["gpt2"], HF_FIXTURES / "bert_tiny_mlm", bad, tmp_path / "missing"]
    rng = random.Random(39)
    for _ in range(ACTIONS):
        _act(rng, window, qtbot, tmp_path, models)
        if window.error_box is not None:
            window.error_box.close()
    qtbot.waitUntil(lambda: window.session.workers.active() == 0, timeout=30_000)
    good = [e for e in window.errors if "broken.safetensors" not in e and "missing" not in e]
    assert good == []
