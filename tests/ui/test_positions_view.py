"""The Positions tab: the table shows results.csv's numbers over seeds with ties marked, a click
on a row draws that variant's interference (as the core measures it), "Open this Variant in the
Stepper" opens its folder and keeps the text, File → Export writes the figures and the table,
and the model opened in the stepper is measured in a worker (or said to have no p vector)."""
from __future__ import annotations

import csv
import statistics

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from transformer_stepper import load_model
from transformer_stepper.core.training import positions_lab as lab
from transformer_stepper.core.training.recipe import Recipe, build_dataset
from transformer_stepper.io.resources import resources_dir
from transformer_stepper.ui.positions import PositionsView
from transformer_stepper.ui.positions.table import TIE

from .conftest import builtin_model_or_skip

LAB = resources_dir() / "positions"
TIMEOUT = 20_000
RANKED = {"heldout_loss": min, "heldout_accuracy": max, "pronoun": max, "agreement": max}


@pytest.fixture
def opened():
    return []


@pytest.fixture
def view(qtbot, session, opened):
    view = PositionsView(session, open_in_stepper=opened.append)
    qtbot.addWidget(view)
    view.resize(1400, 900)
    view.show()
    yield view
    assert view.shutdown(10_000)
    assert view.workers.active() == 0


@pytest.fixture(scope="module")
def corpus_ids():
    """The token ids and positions the lab measured interference over (seed 0's corpus)."""
    dataset = build_dataset(Recipe(steps=1000, seed=0), with_heldout=False)
    return (np.unique(np.concatenate(dataset.train_sequences)),
            max(len(s) for s in dataset.train_sequences) - 1)


def shipped_rows():
    with open(LAB / "results.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def column(view, title):
    headers = [view.table.horizontalHeaderItem(c).text() for c in range(view.table.columnCount())]
    return headers.index(title)


def cell(view, variant, title):
    item = view.table.item(view.table.variants.index(variant), column(view, title))
    return item.text(), item


def select(qtbot, view, variant):
    table = view.table
    row = table.variants.index(variant)
    rect = table.visualRect(table.model().index(row, 0))
    with qtbot.waitSignal(view.variantShown, timeout=TIMEOUT) as shown:
        qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert shown.args == [variant]


def test_the_table_shows_results_csv_over_seeds_and_marks_ties(view):
    rows = shipped_rows()
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    assert view.table.variants == variants and len(variants) == 5
    for key, title, digits, scale in (("heldout_loss", "held-out loss", 3, 1), ("heldout_accuracy", "accuracy", 1, 100),
                                      ("pronoun", "pronoun", 1, 100), ("agreement", "agreement", 1, 100)):
        spreads = {}
        for variant in variants:
            values = [float(r[key]) * scale for r in rows if r["variant"] == variant]
            spreads[variant] = (statistics.mean(values), min(values), max(values))
        best = RANKED[key](variants, key=lambda v: spreads[v][0])
        for variant, (mean, low, high) in spreads.items():
            text, item = cell(view, variant, title)
            first, *second = text.split("\n")
            assert first.lstrip("≈ ") == f"{mean:.{digits}f}", (variant, key, text)
            if f"{low:.{digits}f}" != f"{high:.{digits}f}":
                assert second == [f"{low:.{digits}f}–{high:.{digits}f}"], (variant, key, text)
            overlaps = low <= spreads[best][2] and spreads[best][1] <= high
            if variant == best:
                assert item.font().bold() and not first.startswith("≈")
            elif overlaps:          # within the seed spread of the best: a tie, visibly
                assert first.startswith("≈") and item.background().color() == TIE, (variant, key)
            else:
                assert not first.startswith("≈") and item.background().style() == Qt.BrushStyle.NoBrush
    # at 3 seeds some differences are ties: the mark is not decoration
    assert any(cell(view, v, "held-out loss")[0].startswith("≈") for v in variants)
    assert "tie" in view.tie_note.text() and "seeds 0, 1, 2" in view.tie_note.text()
    text = view.explanation.toPlainText()
    assert "What it does not show" in text and "3 seeds" in text
    loss_best = min(variants, key=lambda v: statistics.mean(float(r["heldout_loss"]) for r in rows if r["variant"] == v))
    assert f"Lowest mean: {loss_best}" in text


def test_selecting_a_row_draws_that_variants_interference(qtbot, view, corpus_ids):
    ids, n_positions = corpus_ids
    for variant in ("sum_learned", "sum_sinusoidal"):
        select(qtbot, view, variant)
        model = load_model(LAB / variant)
        expected = lab.interference(model.params, model.config, ids, n_positions)
        figure = view.figures.variant
        np.testing.assert_allclose(figure.rms_p.getData()[1], expected["rms_p"])
        np.testing.assert_allclose(figure.rms_e.getData()[1], expected["rms_e"])
        np.testing.assert_allclose(figure.cosines.opts["height"], expected["principal_angle_cosines"])
        assert f"{expected['e_variance_in_p_subspace']:.3f}" in figure.panel_titles[1].full_text
        assert variant in figure.title and view.figures.curves.selected == variant
        assert f"Selected: {variant}" in view.explanation.toPlainText()
        assert figure.hover_at(3.2, 0.5) == (f"dimension 3: RMS e {expected['rms_e'][3]:.4f}, "
                                             f"p {expected['rms_p'][3]:.4f}")
        assert f"cos {expected['principal_angle_cosines'][0]:.4f}" in figure.angle_at(0.1)
    # concat: p in the dimensions after e's; rotary: nothing to measure, said so
    curve = view.lab.variants["none"].curve
    assert view.figures.curves.hover_at(999, np.log10(curve["train_loss"][-1])) == \
        f"none, step 1000: training loss {curve['train_loss'][-1]:.4f}"
    select(qtbot, view, "concat")
    x, _ = view.figures.variant.rms_p.getData()
    assert x[0] == len(view.figures.variant.rms_e.getData()[0]) and view.figures.variant.note.isVisible()
    select(qtbot, view, "rotary")
    assert len(view.figures.variant.rms_e.getData()[0] or []) == 0 and "rotary" in view.figures.variant.title


def test_open_this_variant_opens_its_folder(qtbot, view, opened):
    select(qtbot, view, "concat")
    qtbot.mouseClick(view.open_button, Qt.MouseButton.LeftButton)
    assert opened == [str(LAB / "concat")]


def test_in_the_window_it_opens_the_variant_in_the_stepper_and_keeps_the_text(qtbot, window):
    builtin_model_or_skip()
    text = "The king sat by the river and he was tired"
    window.session.set_text(text, immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        window.open_model(None)
    with qtbot.waitSignal(window.tabs.view("positions").yourModelShown, timeout=TIMEOUT):
        view = window.tabs.show_tab("positions")
    select(qtbot, view, "rotary")
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        qtbot.mouseClick(view.open_button, Qt.MouseButton.LeftButton)
    assert window.session.model_path == str(LAB / "rotary")
    assert window.session.model.config.position == "rotary" and window.session.text == text
    assert window.tabs.current_key() == "stepper"
    # back on the tab, the opened model is rotary: said in one line, no figure
    with qtbot.waitSignal(view.yourModelShown, timeout=TIMEOUT) as shown:
        window.tabs.show_tab("positions")
    assert shown.args == ["without"]
    assert "rotary" in view.your_model_line.text() and not view.figures.your_model.isVisible()
    assert view.shutdown(10_000)


def test_the_built_in_model_is_measured_as_your_model(qtbot, window):
    builtin_model_or_skip()
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        window.open_model(None)
    with qtbot.waitSignal(window.tabs.view("positions").yourModelShown, timeout=TIMEOUT) as shown:
        view = window.tabs.show_tab("positions")
    assert shown.args == ["measured"]
    model = window.session.model
    expected = lab.model_interference(model.params, model.config)
    assert view.your_model.interference == expected
    figure = view.figures.your_model
    assert figure.isVisible() and model.name in figure.title
    np.testing.assert_allclose(figure.rms_p.getData()[1], expected["rms_p"])
    np.testing.assert_allclose(figure.cosines.opts["height"], expected["principal_angle_cosines"])
    row = len(view.table.variants)
    assert view.table.item(row, 0).text() == "your model" and model.name in view.table.item(row, 0).toolTip()
    share = view.table.item(row, column(view, "E var. in P's subspace")).text()
    assert share.startswith(f"{expected['e_variance_in_p_subspace']:.3f}")
    assert f"{expected['n_tokens']:,} token rows" in view.explanation.toPlainText()
    assert view.shutdown(10_000)


def test_file_export_writes_the_figures_and_the_table(qtbot, window, tmp_path, monkeypatch):
    builtin_model_or_skip()
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        window.open_model(None)
    with qtbot.waitSignal(window.tabs.view("positions").yourModelShown, timeout=TIMEOUT):
        view = window.tabs.show_tab("positions")
    entries = {a.text(): a for a in window.file_menu.actions()}
    from transformer_stepper.ui.export import dialogs

    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(dialogs, "ask_folder", lambda *a: str(out))
    entries["Export &Figures of This Tab…"].trigger()
    names = sorted(p.name for p in out.iterdir())
    figures = ["curves", "interference-concat", "interference-sum_learned", "interference-sum_sinusoidal",
               "interference-your-model"]
    assert names == sorted([f"positions-{f}.{ext}" for f in figures for ext in ("png", "svg")]
                           + ["positions-table.csv"])
    image = QImage(str(out / "positions-curves.png"))
    assert image.width() >= 800 and image.height() >= 600
    assert b"<svg" in (out / "positions-interference-sum_sinusoidal.svg").read_bytes()[:2000]
    with open(out / "positions-table.csv", newline="", encoding="utf-8") as handle:
        table = {(r["variant"], r["measure"]): r for r in csv.DictReader(handle)}
    rows = shipped_rows()
    losses = [float(r["heldout_loss"]) for r in rows if r["variant"] == "none"]
    exported = table[("none", "heldout_loss")]
    assert float(exported["mean"]) == pytest.approx(statistics.mean(losses))
    assert (float(exported["min"]), float(exported["max"]), int(exported["seeds"])) == (min(losses), max(losses), 3)
    assert exported["standing"] in ("best", "tie", "apart")
    assert any(v.startswith("your model") for v, _ in table)
    assert view.shutdown(10_000)


def test_a_results_folder_of_the_command_replaces_the_shipped_one(qtbot, view, tmp_path):
    import shutil

    (tmp_path / "results.csv").write_text("variant,seed,steps,heldout_loss\nconcat,0,40,4.5\nconcat,1,40,4.7\n")
    shutil.copytree(LAB / "concat", tmp_path / "concat-seed0")
    assert view.load_lab(tmp_path)
    assert view.table.variants == ["concat"] and str(tmp_path) in view.source.text()
    assert view.table.item(0, 1).text() == "4.600\n4.500–4.700"
    assert view.selected_variant() == "concat"
    assert not view.load_lab(tmp_path / "nothing here")          # named, and what was shown stays
    assert "results.csv" in view.readout.text() and view.table.variants == ["concat"]
