"""The detail budget is a preference: kept in the settings, applied to the trace shown (what is
over it given back at once) and to every trace after; the status bar says what is kept, and
says so when one layer alone is over the budget (kept per head)."""
from transformer_stepper.core.trace.trace import DEFAULT_DETAIL_BUDGET
from transformer_stepper.ui.settings.detail_budget import KEY, budget_mib


def test_budget_is_kept_applied_to_every_trace_and_shown(qtbot, loaded_window, settings):
    assert budget_mib(settings) == DEFAULT_DETAIL_BUDGET >> 20
    window = loaded_window("gpt2")
    session = window.session
    trace = session.trace
    n_layer = trace.config.n_layer
    for layer in range(n_layer):
        trace.detail(layer)
    assert trace.cache.layers() == list(range(n_layer))   # the tiny model's layers all fit
    window.detail_budget.show()
    label = window.detail_budget.label.text()
    assert label.startswith(f"detail {n_layer}/{n_layer} layers")
    held = trace.cache.nbytes() / 2**20                  # a fraction of a MiB: said so, not '0'
    assert 0 < held < 1 and f", {held:.1f} / 1,024 MiB" in label, label
    window.detail_budget.set_budget(0)
    assert int(settings.value(KEY)) == 0 and session.detail_budget == 0
    assert trace.cache.budget == 0 and trace.cache.layers() == [n_layer - 1]   # the last one stays
    assert trace.cache.oversized() == n_layer - 1 and trace.cache.per_head() == [n_layer - 1]
    assert window.detail_budget.label.text().startswith(f"detail: layer {n_layer - 1} kept per head")
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text(session.text + " again", immediate=True)
    assert session.trace is not trace and session.trace.cache.budget == 0   # the next trace too
    window.detail_budget.set_budget(1)
    assert session.trace.cache.budget == 1 << 20


def test_a_bad_stored_value_falls_back_to_the_default(settings):
    settings.setValue(KEY, "lots")
    assert budget_mib(settings) == DEFAULT_DETAIL_BUDGET >> 20
    settings.setValue(KEY, -5)
    assert budget_mib(settings) == 0


def test_every_heads_row_of_a_per_head_layer_is_computed_in_a_worker(qtbot, loaded_window, monkeypatch):
    # a layer kept per head derives each head's n² weights when read: the weighted sum's
    # every-head row costs n_head of them (seconds for a long text), so a worker computes it,
    # not the GUI thread (a 4.2 s stall on Llama-1B shape at 2,048 tokens)
    import threading

    from transformer_stepper.core.trace.layer_detail import LayerDetail
    window = loaded_window("gpt2")
    session = window.session
    window.detail_budget.set_budget(0)                   # every layer kept per head
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text(session.text + " again", immediate=True)
    on_gui = []
    head = LayerDetail.head

    def counted(detail, name, h):
        if name == "attn_weights" and threading.current_thread() is threading.main_thread():
            on_gui.append(h)
        return head(detail, name, h)

    monkeypatch.setattr(LayerDetail, "head", counted)
    session.set_stage("weighted_sum")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    layer, i = session.layer, session.selected_token
    assert session.trace.cache.per_head() == [layer]
    expected = session.trace.layer("attn_weights", layer)[:, i]
    # (the every-head row arrives from the worker; a view drawn in turns may draw the shown head twice)
    qtbot.waitUntil(lambda: view.all_heads.values is not None and view.all_heads.values.shape == expected.shape
                    and bool((view.all_heads.values == expected).all()), timeout=10_000)
    assert on_gui and set(on_gui) == {session.head}, "only the shown head's weights on the GUI thread"
