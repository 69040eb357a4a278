"""A stage's first visit only draws: while the window is idle its views are built one per
event-loop turn (hidden, not drawn), and the StallMeter that benchmarks the event loop sees the
gaps it should."""
import time

from PySide6.QtCore import QTimer

from transformer_stepper.ui.plots import Heatmap
from transformer_stepper.ui.stall_meter import StallMeter


def test_views_are_built_while_idle_and_drawn_when_shown(qtbot, loaded_window):
    window = loaded_window("gpt2")
    session = window.session
    keys = [s.key for s in session.available_stages()]
    qtbot.waitUntil(window.stepper.views_built, timeout=20_000)
    assert set(keys) <= set(window.stepper.views)
    hidden = [key for key in keys if key != session.stage_key and not window.stepper.views[key].isVisible()]
    assert hidden, "some views were built without being shown"
    # built while idle: not drawn yet (drawing waits until a view is shown)
    assert not any(window.stepper.views[key].is_current() for key in hidden[1:])
    # and finished in a turn of its own: every heatmap has its colour bar before any visit
    figures = [figure for key in keys for _, figure in window.stepper.views[key].figures()]
    assert any(isinstance(figure, Heatmap) for figure in figures)
    assert all(figure.finished for figure in figures)
    target = hidden[-1]
    session.set_stage(target)
    view = window.stepper.current_view()
    assert view is window.stepper.views[target]
    qtbot.waitUntil(view.is_current, timeout=10_000)


def test_stall_meter_sees_a_blocked_event_loop(qtbot):
    meter = StallMeter()
    meter.start()
    meter.label = "quiet"
    qtbot.wait(60)
    meter.label = "blocked"

    def block() -> None:
        end = time.thread_time() + 0.15      # the GUI thread busy for 150 ms of its CPU time
        while time.thread_time() < end:
            pass

    QTimer.singleShot(0, block)
    qtbot.wait(60)
    meter.label = "asleep"
    QTimer.singleShot(0, lambda: time.sleep(0.15))     # away as long, but computing nothing
    qtbot.wait(60)
    meter.stop()
    label, worst = meter.worst()
    assert label in ("blocked", "asleep") and 0.14 <= worst
    assert meter.longest["quiet"] < 0.1 and meter.longest["asleep"] >= 0.14
    # the GUI thread's own CPU time in a gap: the busy loop's, not the sleep's
    assert meter.worst_cpu()[0] == "blocked" and 0.14 <= meter.longest_cpu["blocked"] < 1.0
    assert meter.longest_cpu["asleep"] < 0.05 and meter.longest_cpu["quiet"] < 0.1


def test_a_view_makes_a_models_own_plots_when_first_needed_with_their_export_menu(qtbot, loaded_window,
                                                                                  model_paths):
    """Position addition makes t (token types) and q, k turning (rotary) for the first model
    that has them; a plot made later gets the same right-click export entries."""
    window = loaded_window("gpt2")              # learned positions, no token types
    session = window.session
    session.set_stage("position_addition")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=10_000)
    assert view.t is None and view.q_turn is None
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        window.open_model(str(model_paths["llama"]))      # rotary
    qtbot.waitUntil(lambda: window.stepper.current_view().is_current(), timeout=10_000)
    view = window.stepper.current_view()
    assert view.q_turn is not None and view.q_turn.isVisible()
    names = [name for name, _ in view.figures()]
    assert "q_rotation" in names and "k_rotation" in names
    texts = [action.text() for action in view.q_turn.scene().contextMenu]
    assert texts == ["Export as PNG…", "Export as SVG…"]


def test_a_heatmap_makes_its_colour_bar_when_finished_or_first_drawn(qtbot):
    import numpy as np

    for make_it in ("finish", "draw"):
        heatmap = Heatmap("t", "x", "y")
        qtbot.addWidget(heatmap)
        assert not heatmap.finished
        if make_it == "finish":
            heatmap.finish()
        else:
            heatmap.set_data(np.arange(6, dtype=np.float32).reshape(2, 3), ["a", "b"], levels=(-5.0, 5.0))
            assert heatmap.colorbar.levels() == (-5.0, 5.0)
        assert heatmap.finished and heatmap.colorbar in heatmap.ci.items


def test_a_closed_window_builds_no_more_views(qtbot, loaded_window):
    # the idle builder is a timer that restarts itself: closing the window must stop it, or
    # views keep being made (connected to the session, never closed) after closeEvent
    window = loaded_window("gpt2")
    keys = [s.key for s in window.session.available_stages()]
    qtbot.waitUntil(lambda: len(window.stepper.views) >= 2, timeout=10_000)
    window.close()
    built = set(window.stepper.views)
    assert not set(keys) <= built, "every view was built before the window closed"
    qtbot.wait(40 * len(keys) * 3)
    assert set(window.stepper.views) == built


class PaintTurns:
    """Which event-loop turn each figure of `figures` first paints in (a zero-interval timer
    counts the turns), and how many paints there were, from start() to stop()."""

    def __init__(self, figures) -> None:
        from PySide6.QtCore import QEvent, QObject

        self.figures = figures
        self.turn = 0
        self.first: dict[int, int] = {}
        self.paints: list[int] = []
        watcher = self

        class Watch(QObject):
            def eventFilter(self, watched, event):
                if event.type() == QEvent.Type.Paint:
                    watcher.first.setdefault(id(watched), watcher.turn)
                    watcher.paints.append(id(watched))
                return False

        self.watch = Watch()
        self.ticker = QTimer()
        self.ticker.setInterval(0)                # once per turn of the event loop
        self.ticker.timeout.connect(self._tick)

    def _tick(self) -> None:
        self.turn += 1

    def start(self) -> None:
        self.clear()
        for figure in self.figures:
            figure.viewport().installEventFilter(self.watch)
        self.ticker.start()

    def clear(self) -> None:
        self.first.clear()
        self.paints.clear()

    def stop(self) -> list:
        self.ticker.stop()
        for figure in self.figures:
            figure.viewport().removeEventFilter(self.watch)
        return [self.first.get(id(figure.viewport())) for figure in self.figures]


def test_a_redrawn_view_paints_its_figures_one_per_event_loop_turn(qtbot, loaded_window):
    """New data for the shown view: its figures take the new values at once, and repaint one
    per event-loop turn (a timer fires between two figures' paints), once each, the
    explanation after."""
    window = loaded_window("gpt2")
    window.resize(1700, 1150)        # every figure in view: one scrolled out of it paints when shown
    session = window.session
    session.set_stage("feed_forward")
    view = window.stepper.current_view()
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)
    figures = [figure for _, figure in view.figures() if figure.isVisible()]
    assert len(figures) >= 4
    watch = PaintTurns(figures)
    watch.start()
    session.traceChanged.connect(watch.clear)          # the paints from the new trace on
    try:
        with qtbot.waitSignal(session.traceChanged, timeout=10_000):
            session.set_text("the money in the bank of the river", immediate=True)
        assert view.is_current() and not view.painted() and not window.stepper.settled()
        assert view.hidden.values.shape[0] == session.trace.n_seq      # the new values, drawn
        assert not watch.paints                   # ... and not painted in this turn
        qtbot.waitUntil(window.stepper.settled, timeout=10_000)
    finally:
        session.traceChanged.disconnect(watch.clear)
        turns = watch.stop()
    assert None not in turns, "every figure repainted"
    assert len(set(turns)) == len(figures), f"figures painted in the same turn: {turns}"
    assert len(watch.paints) == len(figures), "a figure painted twice (pyqtgraph's deferred range)"
    text = window.stepper.explanation.toPlainText()
    assert "{" not in text and str(session.trace.n_seq) in text
    # the histograms, drawn in their figure's turn, are the new trace's; an export of the view
    # right after the next trace draws what still waits at once
    assert_histogram_of(view, session)
    with qtbot.waitSignal(session.traceChanged, timeout=10_000):
        session.set_text("a river", immediate=True)
    assert not view.painted()
    assert "activation_distributions" in dict(view.plots())
    assert_histogram_of(view, session)


def assert_histogram_of(view, session) -> None:
    import numpy as np

    from transformer_stepper.core.model import measures

    pre = session.trace.layer("mlp_pre_act", session.layer)
    limit = max(measures.robust_limit(pre, 99.9), 1e-6)
    _, counts = measures.histogram(np.clip(pre, -limit, limit), bins=80, limit=limit)
    np.testing.assert_array_equal(view.distribution.curves[0].y, np.log10(counts + 1.0).astype(np.float32))


def test_a_view_shown_by_a_step_paints_its_figures_one_per_turn(qtbot, loaded_window):
    """A step to another stage shows a view drawn for the new layer: its figures paint one per
    turn too (the stack switching views has every child's updates off for the moment: the
    figures' own stay off until their turn)."""
    window = loaded_window("gpt2")
    window.resize(1700, 1150)        # every figure in view: one scrolled out of it paints when shown
    session = window.session
    session.set_stage("layer_output")
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)
    qtbot.waitUntil(window.stepper.views_built, timeout=20_000)
    target = window.stepper.views["qkv"]
    figures = [figure for _, figure in target.figures() if not getattr(figure, "unused", False)]
    watch = PaintTurns(figures)
    watch.start()
    try:
        assert session.step(+1) and session.stage_key == "qkv" and session.layer == 1
        assert window.stepper.current_view() is target and target.is_current() and not watch.paints
        qtbot.waitUntil(window.stepper.settled, timeout=10_000)
    finally:
        turns = watch.stop()
    assert None not in turns, "every figure painted"
    assert len(set(turns)) == len(figures), f"figures painted in the same turn: {turns}"


def test_a_built_view_is_finished_one_figure_per_call(qtbot, open_session):
    """The idle builder finishes a view's colour bars in turns of their own: finish_one makes
    one figure's, and says when none is left."""
    from transformer_stepper.ui.stages import create_view

    session = open_session("gpt2")
    view = create_view("position_addition", session)
    qtbot.addWidget(view)
    unfinished = [figure for _, figure in view.figures() if not figure.finished]
    assert len(unfinished) >= 3
    for left in range(len(unfinished) - 1, -1, -1):
        assert view.finish_one()
        assert sum(not figure.finished for _, figure in view.figures()) == left
    assert not view.finish_one()


def test_a_view_built_in_steps_makes_one_figure_a_step_and_the_rest_when_needed(qtbot, open_session):
    """The idle builder builds a view in steps (a figure takes 6-10 ms to make, 20-40 ms on a
    loaded machine): each step makes one figure; a view drawn or exported mid-build builds the
    rest first."""
    from transformer_stepper.ui.stages import create_view

    session = open_session("bert")                 # token types: position addition's 8 figures
    view = create_view("position_addition", session, in_steps=True)
    qtbot.addWidget(view)
    counts = [len(view.figures())]
    while True:
        more = view.build_step()
        counts.append(len(view.figures()))
        if not more:
            break
    assert counts[0] == 0 and counts[-1] == 8, counts
    assert max(b - a for a, b in zip(counts, counts[1:])) <= 1, counts
    assert not view.build_step()
    half = create_view("qkv", session, in_steps=True)
    qtbot.addWidget(half)
    assert half.build_step() and len(half.figures()) == 1
    names = [name for name, _ in half.plots()]       # drawn for an export: built whole first
    # (x, W_Q, the latent-attention pair, hidden for BERT, then q, k, v)
    assert len(half.figures()) == 7 and {"q", "k", "v"} <= set(names)
    assert half.is_current()


def test_the_next_stage_is_painted_ahead_one_figure_per_turn(qtbot, loaded_window):
    """While the user reads a stage, the next one is drawn and painted off screen, a figure
    per event-loop turn; stepping to it then shows what was painted."""
    window = loaded_window("gpt2")
    session = window.session
    qtbot.waitUntil(window.stepper.views_built, timeout=20_000)
    session.set_stage("qkv")
    qtbot.waitUntil(window.stepper.settled, timeout=10_000)
    ahead = window.stepper.views["scores"]
    figures = [figure for _, figure in ahead.figures() if not figure.isHidden()]
    watch = PaintTurns(figures)
    watch.start()
    try:
        window.stepper._prebuild.start(0)                  # (the reader's pause, shortened)
        qtbot.waitUntil(lambda: len(watch.first) == len(figures), timeout=10_000)
    finally:
        turns = watch.stop()
    assert not ahead.isVisible() and ahead.is_current()
    assert len(set(turns)) == len(figures), f"painted in the same turn: {turns}"


def test_one_frame_scheduler_runs_the_shown_views_repaints_then_building_ahead_then_idle_builds(
        qtbot, loaded_window):
    """The stepper's three kinds of drawing over turns are tasks of the session's one frame
    scheduler: the explanation and the shown view's repaints (NOW) go before the next stage
    built and painted ahead (AHEAD), which goes before the views built while idle (IDLE), one
    piece per turn; Compare's figures are drawn by it too (NOW)."""
    from transformer_stepper.state.frames import AHEAD, IDLE, NOW
    from transformer_stepper.ui.stepper.stepper_view import BUILD_AHEAD, EXPLAIN, IDLE_BUILD

    window = loaded_window("gpt2")
    session, stepper, frames = window.session, window.stepper, window.session.frames
    session.set_stage("feed_forward")
    view = stepper.current_view()
    qtbot.waitUntil(stepper.settled, timeout=10_000)
    # (the next stage is built ahead in turns too: let that finish, and hold the idle builder)
    qtbot.waitUntil(lambda: not frames.pending(), timeout=20_000)
    stepper._prebuild.stop()
    ran = []
    frames.on_piece = lambda key, priority: ran.append((priority, key))
    try:
        with qtbot.waitSignal(session.traceChanged, timeout=10_000):
            session.set_text("the money in the bank of the river", immediate=True)
        assert not view.painted()
        stepper._prebuild.stop()
        stepper._start_ahead()                                    # (the reader's pause, over)
        frames.add(IDLE_BUILD, stepper._build_one_view, IDLE)      # (the idle pause, over)
        qtbot.waitUntil(lambda: not frames.pending(), timeout=20_000)
    finally:
        frames.on_piece = None
    assert view.painted()
    priorities = [priority for priority, _ in ran]
    assert priorities == sorted(priorities), ran
    kinds = {priority: {key if isinstance(key, str) else key[0] for p, key in ran if p == priority}
             for priority in (NOW, AHEAD, IDLE)}
    assert kinds == {NOW: {EXPLAIN, "figure turns"}, AHEAD: {BUILD_AHEAD}, IDLE: {IDLE_BUILD}}, kinds
    figures = [figure for _, figure in view.figures() if figure.isVisible()]
    assert ran.count((NOW, view._turns.figures._key)) == len(figures) + 1, "a figure a turn, then its paint's"

    compare = window.tabs.view("compare")
    ran.clear()
    frames.on_piece = lambda key, priority: ran.append((priority, key))
    try:
        with qtbot.waitSignal(compare.updated, timeout=20_000):
            window.tabs.show_tab("compare")
    finally:
        frames.on_piece = None
    drawn = [priority for priority, key in ran if key == compare._frame_key]
    assert len(drawn) >= 2 and set(drawn) == {NOW}, ran
