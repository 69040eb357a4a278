"""With "Show intervened" on, the Attribution tab decomposes the intervened pass (and says so),
an export asked for while that pass still runs waits for it instead of writing the clean
trace, and an export draws the prediction stage with the user's sampling settings."""
import threading
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from transformer_stepper import AblateHead
from transformer_stepper.core.model import ops
from transformer_stepper.core.trace.generate import Sampling
from transformer_stepper.state import shown_trace as session_module
from transformer_stepper.ui.export import dialogs
from transformer_stepper.ui.export.job import ExportJob
from transformer_stepper.ui.export.render import ExportOptions
from transformer_stepper.ui.export.snapshot import SnapshotSession
from transformer_stepper.ui.export.waiting import Waiting
from transformer_stepper.ui.stages import create_view


@pytest.fixture
def gate(monkeypatch):
    """The intervened pass waits in its worker until the test opens the gate."""
    opened = threading.Event()
    real = session_module.run_interventions

    def held(*args):
        assert opened.wait(20)
        return real(*args)

    monkeypatch.setattr(session_module, "run_interventions", held)
    yield opened
    opened.set()                  # never leave a worker waiting


def show_ablated(qtbot, window, layer=1, head=2):
    session = window.session
    session.set_interventions([AblateHead(layer, head)])
    window.show_intervened_action.trigger()
    assert session.show_intervened
    return session


def test_attribution_decomposes_the_intervened_pass_while_it_is_shown(qtbot, loaded_window, gate):
    window = loaded_window("gpt2")
    view = window.tabs.show_tab("attribution")
    qtbot.waitUntil(lambda: view.decomposition is not None, timeout=10_000)
    clean = view.decomposition
    assert abs(clean.head_contributions[1, 2]) > 0
    session = show_ablated(qtbot, window)
    assert session.waiting_for_intervened
    qtbot.waitUntil(lambda: "intervened forward pass" in view.message.text(), timeout=5_000)
    assert view.decomposition is None and view.message.isVisible()     # not the clean numbers
    gate.set()
    qtbot.waitUntil(lambda: view.decomposition is not None, timeout=10_000)
    d, intervened = view.decomposition, session.intervened_trace
    assert d.head_contributions[1, 2] == 0                               # the ablated head
    logits = intervened.logits[d.position]
    assert d.token_id == int(np.argmax(logits))
    assert float(d.contributions.sum()) + d.constant == pytest.approx(float(logits[d.token_id]), abs=1e-4)
    assert d.residual_error < 1e-4
    assert "INTERVENED pass" in view.summary.text() and "ablate layer 1 head 2" in view.summary.text()
    window.show_intervened_action.trigger()                             # back to the clean model
    qtbot.waitUntil(lambda: view.decomposition is not None, timeout=10_000)
    assert view.decomposition.head_contributions[1, 2] == pytest.approx(clean.head_contributions[1, 2])
    assert "INTERVENED" not in view.summary.text()


def test_exporting_while_the_intervened_pass_runs_waits_for_it(qtbot, loaded_window, gate, tmp_path):
    window = loaded_window("gpt2")
    session = show_ablated(qtbot, window)
    session.set_stage("weighted_sum")
    session.set_layer(1)
    session.set_head(2)
    dialog = dialogs.open_figures_dialog(window, all_stages=False)
    dialog.folder.edit.setText(str(tmp_path / "figures"))
    dialog.format.setCurrentIndex(1)                                   # svg
    dialog.accept()
    waiting = [w for w in window.findChildren(Waiting)]
    assert len(waiting) == 1 and not dialogs._running                 # nothing exported yet
    assert "waits for the intervened pass" in window.statusBar().currentMessage()
    data = dialogs.start_data_export(window, tmp_path / "data", ["npy"])
    assert isinstance(data, Waiting)
    with pytest.raises(ValueError, match="still running"):
        SnapshotSession.of(session)
    with qtbot.waitSignal(waiting[0].started, timeout=10_000) as started:
        gate.set()
    job = started.args[0]
    assert isinstance(job, ExportJob) and job.session.trace is session.intervened_trace
    with qtbot.waitSignal(job.finished, timeout=20_000):
        pass
    qtbot.waitUntil(lambda: not dialogs._running, timeout=10_000)
    svg = next((tmp_path / "figures").glob("08-weighted_sum-*.svg")).read_text()
    assert "ablate layer 1 head 2" in svg                               # the facts: intervened
    head_outputs = np.load(tmp_path / "data" / "08-weighted_sum-head_outputs-L1H2.npy")
    np.testing.assert_array_equal(head_outputs, session.intervened_trace.layer("head_outputs", 1)[2])
    assert not np.array_equal(head_outputs, session.trace.layer("head_outputs", 1)[2])
    assert window.errors == []


def test_an_intervened_pass_that_fails_exports_nothing_and_says_so(qtbot, loaded_window, monkeypatch, tmp_path):
    def failing(*args):
        raise MemoryError("no room for the intervened pass")

    monkeypatch.setattr(session_module, "run_interventions", failing)
    window = loaded_window("gpt2")
    session = window.session
    waiting = []
    session.set_interventions([AblateHead(1, 2)])
    window.show_intervened_action.trigger()
    waiting.append(dialogs.start_data_export(window, tmp_path, ["npz"]))
    if not isinstance(waiting[0], Waiting):            # the failure came in first: nothing to wait for
        pytest.skip("the pass failed before the export was asked for")
    qtbot.waitUntil(lambda: any("intervened pass failed" in e for e in window.errors), timeout=10_000)
    assert list(tmp_path.glob("*.npz")) == []
    assert not dialogs._running


def test_an_export_draws_the_prediction_with_the_users_sampling(qtbot, loaded_window, tmp_path):
    window = loaded_window("gpt2")
    session = window.session
    sampling = Sampling(temperature=2.0, top_k=3, top_p=1.0, seed=5)
    session.generation.set_sampling(sampling)
    session.set_stage("prediction")
    snapshot = SnapshotSession.of(session)
    assert snapshot.generation.sampling == sampling
    view = create_view("prediction", snapshot)
    qtbot.addWidget(view)
    view.plots()
    i = snapshot.selected_token
    expected = np.sort(ops.softmax(session.trace.logits_at(i).astype(np.float64) / 2.0))[::-1][:len(view.top.values)]
    np.testing.assert_allclose(view.top.values, expected, rtol=1e-5, atol=1e-7)
    assert "T 2, top-k 3" in view.top.title
    job = ExportJob(snapshot, tmp_path, ["prediction"], ExportOptions("svg"))
    job.run()
    texts = set()
    for path in tmp_path.glob("*.svg"):
        root = ET.parse(path).getroot()
        texts |= {"".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert any("T 2, top-k 3" in t for t in texts), sorted(texts)
    job.deleteLater()
    snapshot.deleteLater()
