"""The window keeps only the trace it shows (views remember what they drew, not the trace),
and a layer's detail is computed in a worker, never on the GUI thread."""
import gc
import threading

from PySide6.QtCore import QThread

from transformer_stepper.core.model import stages
from transformer_stepper.core.trace.trace import Trace
from transformer_stepper.ui.collector import collect


def live_traces(model) -> int:
    """Traces of this model alive now (other tests' traces do not count)."""
    collect()
    # type(), not isinstance(): isinstance reads every object's __class__, and torch's deprecated
    # reduce_op (alive once another test imported torch) warns on that read
    return sum(type(o) is Trace and o.config is model.config for o in gc.get_objects())


def visit_everything(qtbot, window):
    session = window.session
    for layer in range(session.model.config.n_layer):
        session.set_layer(layer)
        for stage in stages.available_stages(session.model.config):
            session.set_stage(stage.key)
            qtbot.waitUntil(lambda: window.stepper.current_view().is_current(), timeout=10_000)


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
    from transformer_stepper.state import session as session_module

    trims = []                      # whether the workers were idle at each trim
    session = open_session("gpt2")
    monkeypatch.setattr(session_module, "return_freed_memory", lambda: trims.append(session.workers.idle))
    session._return_memory.setInterval(100)        # idleness, shorter than the app's
    assert session.workers.wait(10_000)
    qtbot.wait(300)
    assert trims == [], "a small trace's freed heap stays for the next trace"
    monkeypatch.setattr(session_module, "RETURN_MEMORY_FROM", 1)      # every trace is big now
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text("the money in the bank", immediate=True)
    assert trims == [], "not while the window takes the trace"
    qtbot.waitUntil(lambda: session.layer_ready(1), timeout=5_000)     # the next layer, once rested
    qtbot.waitUntil(lambda: len(trims) >= 2, timeout=5_000)
    assert all(trims), "only while no worker runs"


def test_the_next_layer_is_computed_once_the_text_rests_not_while_it_is_drawn(qtbot, loaded_window):
    """A new trace brings the shown layer's detail; the next layer's follows once the text has
    rested (NEXT_LAYER_DELAY_MS), so no worker competes with the window drawing the trace, and
    a text still being typed costs no next layer per keystroke."""
    window = loaded_window("gpt2")
    session = window.session
    assert session.layer == 0
    for text in ("the money", "the money in", "the money in the bank"):     # typed on
        with qtbot.waitSignal(session.traceChanged, timeout=10_000):
            session.set_text(text, immediate=True)
        assert session.layer_ready(0) and not session.layer_ready(1)
    with qtbot.waitSignal(session.layerReady, timeout=10_000) as ready:
        pass                                                   # the text rests
    assert ready.args == [1] and session.layer_ready(1)
    assert session.trace.text == "the money in the bank"


def test_the_embedding_tables_summary_is_computed_in_a_worker(qtbot, loaded_window, monkeypatch):
    """E's overview and row norms read the whole table (0.2 s for a 30,522-row one, mapped
    from the weights file): once per model, off the GUI thread."""
    from transformer_stepper.ui.stages import embedding

    window = loaded_window("gpt2")
    session = window.session
    computed: list[int] = []
    real = embedding._table_summary

    def summary(model):
        if model not in embedding._table_cache:
            computed.append(threading.get_ident())
        return real(model)

    monkeypatch.setattr(embedding, "_table_summary", summary)
    embedding._table_cache.pop(session.model, None)
    session.set_stage("embedding")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    assert computed and threading.get_ident() not in computed
    assert view.nearest.values.size > 0
