"""File → Export Current Stage / All Stages / Trace Data: the dialogs, one file per plot with
the right names, every layer and head on request, progress that lets the event loop run,
cancelling, asking before replacing, failures as one warning with no half-written file, the
window's own session untouched; and the trace's arrays as labelled CSV, .npy and an exact .npz."""
import csv
import re
import threading
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QPushButton

from transformer_stepper.core.model import stages
from transformer_stepper.ui.export import dialogs
from transformer_stepper.ui.export.job import ExportJob, plan
from transformer_stepper.ui.export.render import ExportOptions
from transformer_stepper.ui.export.snapshot import SnapshotSession
from transformer_stepper.ui.stages import create_view

from .test_export_render import full_disk


def names(folder):
    return sorted(p.name for p in folder.iterdir())


def accept(dialog, folder, **choices):
    dialog.folder.edit.setText(str(folder))
    if "format" in choices:
        dialog.format.setCurrentIndex(["png", "svg"].index(choices["format"]))
    if "all_layers_heads" in choices:
        dialog.all_layers_heads.setChecked(choices["all_layers_heads"])
    if "scale" in choices:
        dialog.scale.setCurrentIndex([1, 2, 4].index(choices["scale"]))
    dialog.accept()


def started_job():
    jobs = [j for j in dialogs._running if isinstance(j, ExportJob)]
    assert len(jobs) == 1
    return jobs[0]


@pytest.fixture
def out(tmp_path):
    """An empty folder for the files (the window's settings file lives in tmp_path)."""
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture(autouse=True)
def nothing_left_running():
    yield
    assert not dialogs._running


# ------------------------------------------------------------------------------ current stage
def test_export_current_stage_writes_every_plot_of_it(qtbot, loaded_window, out):
    window = loaded_window("gpt2")
    session = window.session
    session.set_stage("softmax")
    session.set_head(3)
    expected = [f"07-softmax-{name}-L0H3.svg" for name, _ in window.stepper.current_view().plots()]
    dialog = dialogs.open_figures_dialog(window, all_stages=False)
    turns = []
    ticker = QTimer()
    ticker.timeout.connect(lambda: turns.append(1))
    ticker.start(0)
    accept(dialog, out, format="svg")
    job = started_job()
    with qtbot.waitSignal(job.finished, timeout=20_000):
        pass
    ticker.stop()
    assert names(out) == sorted(expected)
    assert len(turns) >= len(expected)               # the event loop ran between the plots
    for name in expected:
        root = ET.parse(out / name).getroot()
        texts = {"".join(t.itertext()).strip() for t in root.iter("{http://www.w3.org/2000/svg}text")}
        assert set(session.token_labels()) <= texts, (name, sorted(texts))
    assert window.errors == []
    assert "Exported 2 file(s)" in window.statusBar().currentMessage()


# ------------------------------------------------------------------------------ all stages
def test_export_all_stages_writes_at_least_one_file_per_stage(qtbot, loaded_window, out):
    window = loaded_window("bert")
    session = window.session
    session.set_layer(1)
    dialog = dialogs.open_figures_dialog(window, all_stages=True)
    assert dialog.every_stage.isChecked()
    accept(dialog, out / "figures", format="png", scale=1)       # created: parent exists
    job = started_job()
    with qtbot.waitSignal(job.finished, timeout=30_000):
        pass
    files = names(out / "figures")
    for stage in stages.available_stages(session.model.config):
        prefix = f"{stage.number:02d}-{stage.key}-"
        mine = [f for f in files if f.startswith(prefix)]
        assert mine, stage.key
        suffix = "-L1H0.png" if stage.per_head else "-L1.png" if stage.per_layer else ".png"
        assert all(re.fullmatch(re.escape(prefix) + r"[a-z0-9_]+" + re.escape(suffix), f) for f in mine), mine
    image = QImage(str(out / "figures" / "07-softmax-attention_weights-L1H0.png"))
    assert (image.width(), image.height()) == (800, 600)
    assert len(files) == len(job.written)
    assert session.layer == 1 and session.head == 0


def test_every_layer_and_head_without_touching_the_window(qtbot, open_session, out):
    session = open_session("gpt2")
    config = session.model.config
    snapshot = SnapshotSession.of(session)
    units, notes = plan(snapshot, ["tokenize", "scores", "feed_forward"], all_layers_heads=True)
    assert notes == []
    assert [u.stage.key for u in units].count("scores") == config.n_layer * config.n_head
    assert [u.stage.key for u in units].count("feed_forward") == config.n_layer
    assert [u.stage.key for u in units].count("tokenize") == 1
    job = ExportJob(snapshot, out, ["scores"], ExportOptions(scale=0.5), all_layers_heads=True)
    job.run()
    expected = {f"06-scores-{plot}-L{layer}H{head}.png" for layer in range(config.n_layer)
                for head in range(config.n_head) for plot in ("scores", "query_scores")}
    assert set(names(out)) == expected
    assert (session.layer, session.head) == (0, 0)            # the window's session is untouched
    a = QImage(str(out / "06-scores-scores-L0H0.png"))
    b = QImage(str(out / "06-scores-scores-L1H3.png"))
    assert a.size() == b.size() and a != b                     # different heads, different figures
    snapshot.deleteLater()


@pytest.mark.parametrize("budget", [0, None])
def test_every_layer_is_computed_in_a_worker_not_on_the_gui_thread(qtbot, open_session, out, budget):
    """Exporting every layer used to compute each layer's detail on the GUI thread (0.1-0.5 s a
    layer on a GPT-2-small-sized model, the window frozen meanwhile). Budget 0: no layer kept,
    each one computed when reached (and again for the next stage); the default: once each."""
    session = open_session("gpt2")
    model = session.model
    trace = model.trace(session.text, detail_budget=0)
    if budget is None:
        trace.cache.set_budget(1 << 30)                     # room for every layer, none kept yet
    computed = []
    compute = trace.cache._compute

    def spy(layer):
        computed.append((layer, threading.current_thread() is threading.main_thread()))
        return compute(layer)

    trace.cache._compute = spy
    snapshot = SnapshotSession(model, trace, layer=0, head=0)
    job = ExportJob(snapshot, out, ["scores", "feed_forward"], ExportOptions(scale=0.5),
                    all_layers_heads=True)
    progress = []
    job.progressed.connect(lambda done, total, _name: progress.append(done))
    job.run()
    assert job.state == "done" and not job.problems
    assert {layer for layer, _ in computed} == set(range(model.config.n_layer))
    assert not [layer for layer, on_gui in computed if on_gui]
    assert progress == sorted(progress) and progress[-1] == job.total
    if budget is None:                                       # kept: each computed once
        assert sorted(layer for layer, _ in computed) == list(range(model.config.n_layer))
    n_layer, n_head = model.config.n_layer, model.config.n_head
    files = names(out)
    assert sum(name.startswith("06-scores-") for name in files) == n_layer * n_head * 2
    per_layer = [sum(name.startswith("10-feed_forward-") and name.endswith(f"-L{layer}.png")
                     for name in files) for layer in range(n_layer)]
    assert per_layer[0] > 0 and per_layer == per_layer[:1] * n_layer
    job.deleteLater()
    snapshot.deleteLater()


def test_stages_without_an_lm_head_are_skipped_with_a_note(qtbot, open_session):
    session = open_session("bert_nohead")
    units, notes = plan(SnapshotSession.of(session), [s.key for s in stages.STAGES])
    assert "prediction" not in {u.stage.key for u in units}
    assert len(notes) == 2 and all("no language-model head" in note for note in notes)
    assert "12-prediction" in notes[0] and "13-logit_lens" in notes[1]


# ------------------------------------------------------------------------------ cancel, replace, fail
def test_cancel_stops_the_export_and_leaves_only_whole_files(qtbot, loaded_window, out):
    window = loaded_window("bert")
    dialog = dialogs.open_figures_dialog(window, all_stages=True)
    accept(dialog, out)
    job = started_job()
    progress = job.progress_dialog
    with qtbot.waitSignal(job.fileWritten, timeout=20_000):
        pass
    with qtbot.waitSignal(job.cancelled, timeout=5_000):
        progress.findChild(QPushButton).click()       # the dialog's Cancel button
    assert job.state == "cancelled"
    files = names(out)
    assert 1 <= len(files) < len(plan(job.session, [s.key for s in stages.STAGES])[0])
    assert not [f for f in files if f.endswith(".part")]
    assert sorted(p.name for p in job.written) == files      # a write under way is counted too
    for f in files:
        assert not QImage(str(out / f)).isNull()
    assert "cancelled" in window.statusBar().currentMessage()
    assert window.errors == []


def test_asks_before_replacing_an_earlier_export(qtbot, loaded_window, out, monkeypatch):
    window = loaded_window("bert")
    window.session.set_stage("scores")
    old = out / "06-scores-scores-L0H0.png"
    old.write_bytes(b"old")
    answers = []
    monkeypatch.setattr(dialogs, "ask_replace", lambda parent, folder, found: answers.append(found) or False)
    accept(dialogs.open_figures_dialog(window, all_stages=False), out)
    assert answers == [["06-scores-scores-L0H0.png"]] and not dialogs._running
    assert old.read_bytes() == b"old"
    monkeypatch.setattr(dialogs, "ask_replace", lambda parent, folder, found: True)
    accept(dialogs.open_figures_dialog(window, all_stages=False), out)
    job = started_job()
    with qtbot.waitSignal(job.finished, timeout=20_000):
        pass
    assert job.replaced == [old] and not QImage(str(old)).isNull()


def test_a_full_disk_fails_with_one_message_and_no_half_file(qtbot, loaded_window, out, monkeypatch):
    window = loaded_window("gpt2")
    window.session.set_stage("softmax")
    full_disk(monkeypatch)
    accept(dialogs.open_figures_dialog(window, all_stages=False), out)
    job = started_job()
    with qtbot.waitSignal(job.failed, timeout=20_000):
        pass
    assert names(out) == []
    assert len(window.errors) == 1
    assert "cannot write (no space left on device)" in window.errors[0]
    assert str(out / "07-softmax-") in window.errors[0]
    assert window.session.trace is not None


def test_a_folder_that_cannot_be_made_is_named(qtbot, loaded_window, out):
    window = loaded_window("bert")
    accept(dialogs.open_figures_dialog(window, all_stages=False), out / "a" / "b")
    assert window.errors == [f"{out / 'a'}: folder does not exist"]
    assert not dialogs._running


def test_a_bug_in_rendering_is_reported_not_raised(qtbot, open_session, out, monkeypatch):
    session = open_session("bert")
    from transformer_stepper.ui.export import job as job_module

    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(job_module, "render", broken)
    from transformer_stepper.state import export_run       # the steps' driver prints the bug
    monkeypatch.setattr(export_run.traceback, "print_exc", lambda: None)
    job = ExportJob(SnapshotSession.of(session), out, ["softmax"], ExportOptions())
    with pytest.raises(Exception, match="rendering failed: ZeroDivisionError: boom"):
        job.run()
    assert names(out) == []


# ------------------------------------------------------------------------------ trace data
def test_export_trace_data_csv_npy_and_an_exact_npz(qtbot, loaded_window, out):
    window = loaded_window("gpt2")
    session = window.session
    session.set_stage("scores")
    session.set_layer(1)
    session.set_head(2)
    dialog = dialogs.open_data_dialog(window)
    dialog.folder.edit.setText(str(out))
    dialog.accept()
    export = next(iter(dialogs._running))
    with qtbot.waitSignal(export.finished, timeout=20_000):
        pass
    trace = session.trace
    assert names(out) == sorted([
        "06-scores-scores_raw-L1H2.csv", "06-scores-scores_raw-L1H2.npy",
        "06-scores-scores-L1H2.csv", "06-scores-scores-L1H2.npy",
        "06-scores-mask-L1H2.csv", "06-scores-mask-L1H2.npy", "trace.npz",
        "export-facts.json"])
    with open(out / "06-scores-scores-L1H2.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    assert table[0][:2] == ["position", "token"] and table[0][2:] == [f"{j}:{t}" for j, t in enumerate(trace.tokens)]
    assert [row[1] for row in table[1:]] == list(trace.tokens)
    assert np.array_equal(np.load(out / "06-scores-scores-L1H2.npy"), trace["scores"][1, 2])
    expected = trace.to_dict()
    with np.load(out / "trace.npz", allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(expected)
        for name, value in expected.items():
            assert archive[name].dtype == value.dtype and np.array_equal(archive[name], value), name
    assert "Exported 8 file(s)" in window.statusBar().currentMessage()


def test_trace_data_on_a_full_disk_is_one_warning(qtbot, loaded_window, out, monkeypatch):
    window = loaded_window("bert")
    full_disk(monkeypatch)
    export = dialogs.start_data_export(window, out, ["npz"])
    with qtbot.waitSignal(export.failed, timeout=20_000):
        pass
    assert names(out) == []
    assert window.errors == [f"{out / 'trace.npz'}: cannot write (no space left on device)"]


def test_menu_entries_follow_the_trace(qtbot, window):
    entries = {a.text(): a for a in window.file_menu.actions()}
    for text in ("Export Current &Stage…", "Export &All Stages…", "Export &Trace Data…"):
        assert text in entries and not entries[text].isEnabled()


def test_an_exported_view_matches_the_window_view(qtbot, loaded_window, out):
    """The snapshot draws what the window shows: same selection, same temperature."""
    window = loaded_window("bert")
    session = window.session
    session.set_stage("softmax")
    session.select_token(3)
    session.set_temperature(2.0)
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)       # (a view shown unbuilt draws in turns)
    snapshot = SnapshotSession.of(session)
    view = create_view("softmax", snapshot)
    qtbot.addWidget(view)
    view.plots()
    np.testing.assert_array_equal(view.weights.values, window.stepper.current_view().weights.values)
    assert view.row.title == window.stepper.current_view().row.title
    snapshot.deleteLater()


def test_ctrl_c_during_a_headless_export_stops_it_cleanly(qtbot, open_session, out, monkeypatch):
    session = open_session("bert")
    from transformer_stepper.ui.export import job as job_module

    real_render, calls = job_module.render, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_render(*args, **kwargs)

    monkeypatch.setattr(job_module, "render", interrupted)
    job = ExportJob(SnapshotSession.of(session), out, ["embedding"], ExportOptions(scale=0.5))
    with pytest.raises(KeyboardInterrupt):
        job.run()
    assert job.state == "cancelled"
    assert names(out) == sorted(p.name for p in job.written) and len(job.written) == 2
