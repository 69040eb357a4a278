"""The Training tab under pytest-qt: a tiny recipe runs in its worker, the figures get data,
Pause holds it, Resume and Stop end it cleanly, a finished run scrubs, opens a snapshot in the
stepper and saves; no thread is left running."""
from __future__ import annotations

import numpy as np
import pytest

from transformer_stepper.core.training import corpus
from transformer_stepper.core.training.recipe import QUICK
from transformer_stepper.io.model_folder import HISTORY_FILE, MODEL_FILES
from transformer_stepper.ui.training import TrainingView
from transformer_stepper.ui.training import worker as worker_module

TINY = QUICK.replace(steps=30, n_heldout=20, batch_size=8, d_model=16, d_ff=32, n_layer=1,
                     corpus=corpus.CorpusConfig(n_passages=150, max_episodes=1))


@pytest.fixture
def view(qtbot, monkeypatch):
    monkeypatch.setattr(worker_module, "FRAME_SECONDS", 0.0)    # a frame every step
    opened = []
    view = TrainingView(open_in_stepper=opened.append, recipes={"quick": TINY})
    view.opened = opened
    qtbot.addWidget(view)
    view.resize(1300, 800)
    view.show()
    yield view
    assert view.shutdown(10_000)
    assert view.worker is None


def test_a_run_feeds_every_figure_and_finishes(qtbot, view):
    with qtbot.waitSignal(view.runEnded, timeout=30_000) as ended:
        view.start()
        assert not view.train_button.isEnabled() and view.stop_button.isEnabled()
    assert ended.args == ["finished"]
    assert view.frames_drawn >= 1 and view.progress.value() == TINY.steps
    frame = view.last_frame
    assert frame.step == TINY.steps
    x, y = view.loss.train.getData()
    assert len(x) == TINY.steps and np.array_equal(y, frame.train_losses)
    assert view.loss.baseline.isVisible() and view.loss.baseline.value() == pytest.approx(frame.unigram_loss)
    assert len(view.loss.heldout.getData()[0]) == len(frame.heldout_steps) >= 2
    # the map shows every non-special row; the lookup strip is zero exactly off the batch
    n_special = sum(c == "special" for c in view.classes)
    assert len(view.embedding.points.data) == len(view.words) - n_special
    outside = np.setdiff1d(np.arange(len(view.words)), frame.batch_ids)
    outside = outside[outside != 0]                         # [PAD]: inputs, never a loss
    assert np.all(frame.lookup_grad_norms[frame.batch_ids] > 0)
    assert np.all(view.lookup_strip.norms[outside] == 0)
    assert np.all(view.head_strip.norms > 0)
    assert view.table.rowCount() == 4 and view.table.item(0, 0).text()
    assert view.table.verticalHeaderItem(0).text() == "queen"
    assert "held-out accuracy" in view.status.text()
    assert view.save_button.isEnabled() and view.open_button.isEnabled() and view.slider.isEnabled()
    assert "Step 30 of 30" in view.explanation.toPlainText()


def test_pause_holds_the_run_resume_continues_stop_ends_it(qtbot, view):
    with qtbot.waitSignal(view.frameShown, timeout=30_000):
        view.start()
    view.toggle_pause()
    assert view.worker.control.paused and view.pause_button.text() == "Resume"
    qtbot.waitUntil(lambda: view.worker.control.waiting, timeout=10_000)
    held = view.worker.control                              # the loop is held between steps
    sent = view.worker.frames_sent
    assert held.waiting and view.worker.frames_sent == sent and not view.outcome
    with qtbot.waitSignal(view.frameShown, timeout=10_000):
        view.toggle_pause()
    assert not held.paused and view.pause_button.text() == "Pause"
    with qtbot.waitSignal(view.runEnded, timeout=10_000) as ended:
        view.stop()
    assert ended.args == ["stopped"]
    assert view.worker is None and view.train_button.isEnabled()
    assert not view.save_button.isEnabled()                 # nothing half-trained to save
    assert "nothing was saved" in view.status.text()


def test_shutdown_stops_a_paused_run(qtbot, view):
    with qtbot.waitSignal(view.frameShown, timeout=30_000):
        view.start()
    view.toggle_pause()
    thread = view.worker
    assert view.shutdown(10_000)
    assert thread.isFinished() and view.worker is None


def test_scrub_open_and_save_after_a_run(qtbot, view, tmp_path):
    with qtbot.waitSignal(view.runEnded, timeout=30_000):
        view.start()
    history = view.outcome.history
    view.slider.setValue(0)
    assert view.snapshot_label.text().startswith("step 0 ")
    first = view.embedding.coords.copy()
    view.slider.setValue(view.slider.maximum())
    assert not np.allclose(first, view.embedding.coords)    # E moved between step 0 and the end
    assert view.separation.cursor.value() == history.snapshot_steps[-1]
    view.slider.setValue(0)
    view.open_snapshot()
    assert len(view.opened) == 1 and "step0" in view.opened[0]
    from transformer_stepper import load_model
    untrained = load_model(view.opened[0])
    assert np.array_equal(np.asarray(untrained.params["wte"]), history.snapshots[0])
    out = tmp_path / "trained"
    assert view.save_to(str(out))
    assert sorted(p.name for p in out.iterdir()) == sorted(MODEL_FILES + (HISTORY_FILE,))
    assert not view.save_to(str(out))                       # exists: one clear message
    assert "not empty" in view.message.text()


def test_the_tab_host_creates_the_view_and_stops_it_on_close(qtbot, window, monkeypatch):
    monkeypatch.setattr(worker_module, "FRAME_SECONDS", 0.0)
    view = window.tabs.show_tab("training")
    view.recipes["quick"] = TINY
    view.recipe_box.setCurrentIndex(view.recipe_box.findData("quick"))
    with qtbot.waitSignal(view.frameShown, timeout=30_000):
        view.start()
    thread = view.worker
    window.close()
    assert thread.isFinished() and view.worker is None
