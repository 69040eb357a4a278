"""The window keeps only the trace it shows (views remember what they drew, not the trace),
and a layer's detail is computed in a worker, never on the GUI thread."""
import gc
import threading

from PySide6.QtCore import QThread

from transformer_stepper.core import stages
from transformer_stepper.core.trace import Trace


def live_traces(model) -> int:
    """Traces of this model alive now (other tests' traces do not count)."""
    gc.collect()
    return sum(isinstance(o, Trace) and o.config is model.config for o in gc.get_objects())


def visit_everything(qtbot, window):
    session = window.session
    for layer in range(session.model.config.n_layer):
        session.set_layer(layer)
        for stage in stages.available_stages(session.model.config):
            session.set_stage(stage.key)
            qtbot.waitUntil(lambda: window.current_view().is_current(), timeout=10_000)


def test_only_the_shown_trace_is_alive_after_visiting_every_stage(qtbot, loaded_window):
    window = loaded_window("llama")
    session = window.session
    for text in ("the bank of the river", "the money in the bank", "a river"):
        with qtbot.waitSignal(session.traceChanged, timeout=10_000):
            session.set_text(text, immediate=True)
        visit_everything(qtbot, window)
    assert session.workers.wait(10_000)
    qtbot.wait(50)                  # the workers' last results delivered
    assert live_traces(session.model) == 1, "nothing keeps a replaced trace"
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text("the bank", immediate=True)   # the views built, none of them shown
    assert session.workers.wait(10_000)
    qtbot.wait(50)
    assert live_traces(session.model) == 1, "a hidden view keeps no trace it drew"


def test_layer_detail_is_never_computed_on_the_gui_thread(qtbot, loaded_window, monkeypatch):
    window = loaded_window("gpt2")
    session = window.session
    gui = threading.get_ident()
    threads: list[int] = []
    real = Trace.detail

    def detail(self, layer):
        if not self.is_ready(layer):
            threads.append(threading.get_ident())
        return real(self, layer)

    monkeypatch.setattr(Trace, "detail", detail)
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text("the river bank and the money bank", immediate=True)
    visit_everything(qtbot, window)
    assert session.workers.wait(10_000)
    assert threads, "layers were computed"
    assert gui not in threads, "a layer's detail was computed on the GUI thread"
    assert QThread.currentThread() is window.thread()


def test_status_bar_shows_trace_and_process_memory(qtbot, loaded_window):
    window = loaded_window("gpt2")
    window._show_memory()
    text = window.memory_label.text()
    assert text.startswith("trace ") and "MiB" in text
    assert window.session.trace_memory() == window.session.trace.nbytes() > 0


def test_with_a_big_trace_freed_memory_goes_back_once_the_workers_are_idle(qtbot, open_session,
                                                                          monkeypatch):
    from transformer_stepper.ui import session as session_module

    trims = []
    monkeypatch.setattr(session_module, "return_freed_memory", lambda: trims.append(1))
    session = open_session("gpt2")
    assert session.workers.wait(10_000)
    qtbot.wait(3 * session_module.RETURN_MEMORY_AFTER_MS)
    assert trims == [], "a small trace's freed heap stays for the next trace"
    monkeypatch.setattr(session_module, "RETURN_MEMORY_FROM", 1)      # every trace is big now
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text("the money in the bank", immediate=True)
    qtbot.waitUntil(lambda: trims == [1], timeout=5_000)
    assert session.workers.idle
    qtbot.wait(3 * session_module.RETURN_MEMORY_AFTER_MS)
    assert trims == [1], "once per idle turn of the workers"
