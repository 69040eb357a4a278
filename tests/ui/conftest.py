"""UI fixtures: tiny random models of every family written to disk (opened through the real
loader, in a worker, as the app does), a window with its settings in a temporary file, and a
teardown that fails if a worker thread is still running."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, QThreadPool

from tests.builders import random_params, tiny_config, tokenizer_for, write_npz_model
from transformer_stepper.io.resources import builtin_model_dir
from transformer_stepper.ui.collector import collect
from transformer_stepper.ui.main_window import MainWindow
from transformer_stepper.ui.session import Session

# kind -> (tiny_config kind, changes): BERT-like, GPT-2-like, and a causal sinusoidal model
# shaped like the built-in one; plus a BERT without a head (as all-MiniLM-L6-v2)
MODELS = {
    "bert": ("bert", {}),
    "gpt2": ("gpt2", {}),
    "sinusoidal": ("sinusoidal", {"causal": True, "norm": "pre", "final_norm": True}),
    "bert_nohead": ("bert", {"lm_head": False, "lm_head_transform": False}),
    # rotary positions, RMSNorm, SwiGLU, 2 query heads per K/V head, untied head
    "llama": ("llama", {}),
}
# the committed HF fixtures of every other family (tests/fixtures/, checked against transformers)
HF_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE_FAMILIES = ("mistral_tiny", "qwen2_tiny", "qwen3_tiny", "gemma_tiny", "roberta_tiny",
                    "distilbert_tiny", "phi3_tiny", "phi35_tiny", "phi4_mini_tiny", "pythia_tiny",
                    "llama_tiny_yarn", "llama_tiny_dynamic")
TEXT = {"bert": "the bank of the river", "gpt2": "the bank of the river",
        "sinusoidal": "she sat by the river bank", "bert_nohead": "he sat on the bank", "llama": "the bank of the river"}


@pytest.fixture(scope="session")
def model_paths(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tiny_models")
    paths = {}
    for name, (kind, changes) in MODELS.items():
        config = tiny_config(kind, **changes).replace(name=f"tiny-{name}")
        paths[name] = write_npz_model(folder / f"{name}.npz", config, random_params(config, seed=1),
                                      tokenizer_for(kind))
    return paths


@pytest.fixture
def settings(tmp_path) -> QSettings:
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def session(qtbot):
    session = Session(debounce_ms=5)
    yield session
    assert session.shutdown(10_000), "a worker was still running after 10 s"
    assert session.workers.active() == 0


@pytest.fixture
def open_session(qtbot, session, model_paths):
    """A session with a model open and traced: open_session(kind) -> session."""
    def opener(kind: str) -> Session:
        session.set_text(TEXT[kind], immediate=True)
        with qtbot.waitSignal(session.traceChanged, timeout=10_000):
            session.open_model(str(model_paths[kind]))
        assert session.trace is not None
        return session
    return opener


@pytest.fixture
def window(qtbot, settings):
    session = Session(debounce_ms=5)
    window = MainWindow(session, settings)
    session.setParent(window)
    qtbot.addWidget(window)
    window.resize(1300, 820)
    window.show()
    yield window
    window.close()
    assert session.workers.wait(10_000)
    assert session.workers.active() == 0


@pytest.fixture
def loaded_window(qtbot, window, model_paths):
    def loader(kind: str) -> MainWindow:
        window.session.set_text(TEXT.get(kind, "the bank of the river"), immediate=True)
        path = model_paths[kind] if kind in model_paths else HF_FIXTURES / kind
        with qtbot.waitSignal(window.session.traceChanged, timeout=10_000):
            window.open_model(str(path))
        return window
    return loader


@pytest.fixture(scope="session", autouse=True)
def collect_garbage_between_tests_only():
    """As the app does (ui.app.application): no cyclic garbage collection at random moments,
    which could destroy Qt objects in a worker thread or inside a Qt call holding a lock (a
    deadlock seen with windows of earlier tests collected during a signal disconnect).
    What exists when the first UI test starts (modules, Qt's and pyqtgraph's wrappers, and torch
    and transformers when the reference tier ran first) lives to the end: it is frozen out of
    the collections, which then walk only what the tests make (with torch loaded a collection
    walked ~260,000 objects, ~0.26 s, and one runs after every test)."""
    gc.disable()
    collect()
    gc.freeze()
    yield
    gc.unfreeze()
    gc.enable()


@pytest.fixture(autouse=True)
def no_dangling_threads(qtbot):
    yield
    assert QThreadPool.globalInstance().waitForDone(10_000)
    collect()             # here, between tests, it is safe: Qt's deferred deletions first
                          # (ui/collector.py), so no half-freed pyqtgraph item is called later


LAPTOP = (1366, 768)


def gpt2_laptop_window(qtbot, loaded_window, text: str):
    """The GPT-2 fixture in a laptop-sized window, traced on `text`."""
    window = loaded_window("gpt2")
    window.resize(*LAPTOP)
    qtbot.waitExposed(window)
    with qtbot.waitSignal(window.session.traceChanged, timeout=10_000):
        window.session.set_text(text, immediate=True)
    return window


def builtin_model_or_skip() -> Path:
    path = builtin_model_dir()
    if not (path / "config.json").is_file():
        pytest.skip(f"the built-in model is not there yet ({path})")
    return path


def pytest_collection_modifyitems(config, items):
    # the offscreen platform cannot propagate a window's size hints and says so on every show;
    # that is the platform's limitation, not the app's
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.qt_log_ignore("does not support propagateSizeHints"))
