"""Launch, the built-in fallback, settings, the status bar, the Hugging Face cache list."""
from pathlib import Path

from transformer_stepper.core.model import stages
from transformer_stepper.io.hf_cache import hub_cache_dir, list_cached_models
from transformer_stepper.ui import app
from transformer_stepper.ui.main_window import MainWindow

from tests.builders import tiny_config

from .conftest import builtin_model_or_skip


def test_launch_on_a_model_and_text(qtbot, model_paths, settings):
    window = app.create_main_window(str(model_paths["gpt2"]), "the river bank", settings)
    qtbot.addWidget(window)
    window.show()
    assert window.progress.isVisibleTo(window)            # the model opens in a worker
    assert window.busy_label.text().startswith("Opening")
    with qtbot.waitSignal(window.session.traceChanged, timeout=10_000):
        pass
    qtbot.waitUntil(lambda: not window.progress.isVisibleTo(window), timeout=5_000)
    assert window.session.trace.text == "the river bank"
    assert window.stepper.text_box.text() == "the river bank"
    assert "tiny-gpt2" in window.model_label.text() and "parameters" in window.params_label.text()
    assert window.tokens_label.text().startswith(f"{window.session.trace.n_seq} tokens")
    assert "ms" in window.time_label.text()
    assert window.stepper.stage_list.currentRow() == 0
    window.close()


def test_missing_model_shows_an_error_and_an_empty_usable_window(qtbot, settings, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("TRANSFORMER_STEPPER_RESOURCES", str(tmp_path / "no-resources"))
    window = app.create_main_window(None, None, settings)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.session.openFailed, timeout=10_000):
        pass
    assert window.session.model is None
    assert "no-resources" in window.errors[-1] and window.error_box.isVisible()
    assert not window.next_action.isEnabled()
    view = window.stepper.current_view()
    assert view.placeholder.isVisibleTo(window) and not view.table.isVisibleTo(window)
    window.error_box.close()
    window.close()


def test_builtin_model_is_the_default(qtbot, settings):
    builtin_model_or_skip()
    window = app.create_main_window(None, None, settings)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.session.traceChanged, timeout=30_000):
        pass
    assert window.session.model_path is None and window.errors == []
    window.close()


def test_geometry_last_model_and_recent_models_are_remembered(qtbot, loaded_window, settings):
    window = loaded_window("bert")
    window.resize(window.width(), 555)   # the offscreen screen is only 800 x 600
    window.close()
    assert settings.value("last_model").endswith("bert.npz")
    assert window.recent.paths()[0].endswith("bert.npz")
    again = MainWindow(settings=settings)
    qtbot.addWidget(again)
    assert again.height() == 555
    again.close()


def test_stage_list_follows_core_stages(qtbot, window):
    titles = [window.stepper.stage_list.item(i).text() for i in range(window.stepper.stage_list.count())]
    assert [t.split(None, 1)[1] for t in titles] == [s.title for s in stages.STAGES]


def test_hf_cache_lists_snapshots_with_a_config(tmp_path):
    hub = tmp_path / "hub"
    good = hub / "models--org--tiny-bert" / "snapshots" / "abc123"
    good.mkdir(parents=True)
    (good / "config.json").write_text("{}")
    (hub / "models--org--no-config" / "snapshots" / "def456").mkdir(parents=True)
    (hub / "datasets--org--data").mkdir(parents=True)
    models = list_cached_models(hub)
    assert [(m.repo_id, m.revision, m.path) for m in models] == [("org/tiny-bert", "abc123", good)]
    assert list_cached_models(tmp_path / "missing") == []
    assert hub_cache_dir({"HF_HOME": "/x"}) == Path("/x/hub")
    assert hub_cache_dir({"HF_HUB_CACHE": "/y", "HF_HOME": "/x"}) == Path("/y")
    assert hub_cache_dir({}).parts[-2:] == ("huggingface", "hub")


def test_stage_walk_is_data():
    """Stepping follows core/model/stages.py: per-layer stages repeat per layer, the head-less
    model has no prediction stage."""
    bert = tiny_config("bert", lm_head=False, lm_head_transform=False)
    assert stages.step("position_addition", 5, +1, bert) == ("qkv", 0)
    assert stages.step("layer_output", 0, +1, bert) == ("qkv", 1)
    assert stages.step("layer_output", bert.n_layer - 1, +1, bert) is None
    assert stages.step("tokenize", 0, -1, bert) is None
    gpt2 = tiny_config("gpt2")
    assert stages.step("layer_output", gpt2.n_layer - 1, +1, gpt2) == ("prediction", gpt2.n_layer - 1)
    assert stages.step("prediction", 1, -1, gpt2) == ("layer_output", gpt2.n_layer - 1)
