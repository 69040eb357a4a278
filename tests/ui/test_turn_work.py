"""The GUI thread's work in one event-loop turn stays small where an 8B model made it large
(tests/bench/bench_real_size_gui.py with --profile-gaps found these): the layer output's
tokens' lines are one item, not one each (33 items made in one turn, 0.2 s); the feed-forward
scatter hands pyqtgraph one point per pixel, not all 14,336 hidden units (0.17 s in its
per-point Python); and a stage shown before it was built makes one figure a turn, none of them
painted before the view draws, then shows them with one layout. Counted (items, points,
figures, paints, resizes), not timed."""
from __future__ import annotations

import collections

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QWidget

from tests.builders import random_params, tiny_config, tokenizer_for, write_npz_model
from transformer_stepper.core.model import measures
from transformer_stepper.ui.plots.common import format_value
from transformer_stepper.ui.plots.figure import Figure
from transformer_stepper.ui.stages.turns import StageTurns

TEXT = " ".join(["the bank of the river was steep and green and the water ran fast below it"] * 3)
D_FF = 4096


@pytest.fixture(scope="module")
def long_model(tmp_path_factory):
    """One layer, a wide feed-forward (4,096 hidden units), room for a 40-token text."""
    config = tiny_config("llama", d_ff=D_FF, n_layer=1, n_ctx=96).replace(name="wide-ff")
    path = tmp_path_factory.mktemp("wide_ff") / "wide_ff.npz"
    return write_npz_model(path, config, random_params(config, seed=5), tokenizer_for("llama"))


def open_long(qtbot, window, path):
    window.session.set_text(TEXT, immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=60_000):
        window.open_model(str(path))
    assert window.session.trace.n_seq > 34          # more tokens than the drift shows lines


def shown(qtbot, window, key):
    window.session.set_stage(key)
    qtbot.waitUntil(window.stepper.settled, timeout=30_000)
    return window.stepper.views[key]


def test_the_layer_outputs_token_lines_are_one_item(qtbot, window, long_model):
    open_long(qtbot, window, long_model)
    view = shown(qtbot, window, "layer_output")
    items = [item for item in view.drift.plot.listDataItems()
             if isinstance(item, pg.PlotDataItem) and item.isVisible()]
    assert len(items) == 3, "the mean, the other tokens (one item), the selected token"
    # every other token's line is there, exact, and named on hover
    trace, i = window.session.trace, window.session.selected_token
    cosines = np.stack([measures.cosine_rows(s, trace.hidden_states[0]) for s in trace.hidden_states])
    bundle = next(curve for curve in view.drift.curves if np.ndim(curve.y) == 2)
    others = [j for j in range(trace.n_seq) if j != i][:32]
    np.testing.assert_array_equal(bundle.y, cosines[:, others].T)
    j = others[5]
    text = view.drift.hover_at(1.0, float(cosines[1, j]))
    assert text is not None and f"({j})" in text and text.endswith(format_value(float(cosines[1, j])))


def test_the_feed_forward_scatter_draws_one_point_per_pixel(qtbot, window, long_model):
    open_long(qtbot, window, long_model)
    view = shown(qtbot, window, "feed_forward")
    scatter = view.shape
    pre = window.session.trace.layer("mlp_pre_act", 0)[window.session.selected_token]
    post = window.session.trace.layer("mlp_act", 0)[window.session.selected_token]
    assert len(pre) == D_FF
    drawn_x, drawn_y = scatter.points.getData()
    vb = scatter.plot.vb
    (x0, x1), (y0, y1) = vb.viewRange()
    cell_x, cell_y = (x1 - x0) / vb.width(), (y1 - y0) / vb.height()
    assert len(drawn_x) <= 0.5 * D_FF, f"{len(drawn_x)} of {D_FF} points given to pyqtgraph"
    # nothing lost: every unit is within about a pixel of a drawn point, and its hover is exact
    near = np.min(np.maximum(np.abs(pre[:, None] - drawn_x[None, :]) / cell_x,
                             np.abs(post[:, None] - drawn_y[None, :]) / cell_y), axis=1)
    assert near.max() <= 1.5
    np.testing.assert_array_equal(scatter.x, pre)
    np.testing.assert_array_equal(scatter.y, post)


def test_one_per_pixel_keeps_a_point_in_each_occupied_cell_and_the_extremes():
    from transformer_stepper.ui.plots.scatter import one_per_pixel
    rng = np.random.default_rng(0)
    x = rng.normal(size=20_000).astype(np.float32)
    y = np.tanh(x) + rng.normal(scale=0.01, size=x.size).astype(np.float32)
    x[7] = np.nan
    kept = one_per_pixel(x, y, 0.01, 0.01)
    finite = np.isfinite(x)
    fx, fy = x[finite].astype(np.float64), y[finite].astype(np.float64)
    cells = set(zip(np.floor((fx - fx.min()) / 0.01).astype(int), np.floor((fy - fy.min()) / 0.01).astype(int)))
    assert 7 not in kept and len(kept) >= len(cells) and len(kept) <= len(cells) + 4
    assert {int(np.nanargmin(x)), int(np.nanargmax(x)), int(np.argmin(y)), int(np.argmax(y))} <= set(kept)
    assert np.array_equal(one_per_pixel(x, y, 0.0, 0.01), np.flatnonzero(finite))


class PaintWatcher(QObject):
    """Notes the view's figures painted while its placeholder is up (the build in turns), and
    each figure's resizes (layouts) within one of the view's build-and-draw pieces."""

    def __init__(self, view) -> None:
        super().__init__()
        self.view, self.painted = view, []
        self.in_piece = False
        self.resized: collections.Counter = collections.Counter()     # in this piece
        self.most_resized: list[int] = []     # per piece: the most resizes of one figure

    def piece_done(self) -> None:
        self.most_resized.append(max(self.resized.values(), default=0))
        self.resized.clear()

    def eventFilter(self, watched, event) -> bool:
        kind = event.type()
        if kind == QEvent.Type.Paint and self.view.placeholder.isVisible():
            owner = watched.parent() if isinstance(watched, QWidget) else None
            if any(owner is figure for _, figure in self.view.figures()):
                self.painted.append(owner.title_label.text)
        elif (kind == QEvent.Type.Resize and self.in_piece
              and any(watched is figure for _, figure in self.view.figures())):
            self.resized[id(watched)] += 1
        return False


@pytest.fixture
def figures_made(monkeypatch):
    made = [0]
    original = Figure.__init__

    def counting(self, *args, **kwargs):
        made[0] += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "__init__", counting)
    return made


@pytest.fixture
def watched_pieces(monkeypatch):
    """A StageView's build-and-draw pieces (ui/stages/turns.py), noted by the PaintWatcher set
    in `watcher[0]`."""
    watcher: list = [None]
    original = StageTurns._piece

    def noted(turns, *args):
        view = turns._view()
        if watcher[0] is None or watcher[0].view is not view:
            return original(turns, *args)
        watcher[0].in_piece = True
        try:
            return original(turns, *args)
        finally:
            watcher[0].in_piece = False
            watcher[0].piece_done()

    monkeypatch.setattr(StageTurns, "_piece", noted)
    return watcher


@pytest.mark.parametrize("key", ["scores", "output_projection", "feed_forward", "qkv"])
def test_a_stage_shown_unbuilt_makes_one_figure_a_turn_and_paints_none_before_drawing(
        qtbot, window, long_model, figures_made, watched_pieces, key):
    open_long(qtbot, window, long_model)
    session, stepper = window.session, window.stepper
    stepper.stop_building()                 # (no idle builder: the visit builds the view)
    if key in stepper.views:
        pytest.skip(f"{key} was built before the visit")
    per_turn: list[int] = []
    last = [figures_made[0]]

    def on_piece(_key, _priority):           # (what the turn before this piece made)
        per_turn.append(figures_made[0] - last[0])
        last[0] = figures_made[0]

    session.frames.on_piece = on_piece
    before = figures_made[0]
    session.set_stage(key)
    assert figures_made[0] - before <= 1, "figures made in the turn that showed the stage"
    last[0] = figures_made[0]
    view = stepper.views[key]
    watcher = watched_pieces[0] = PaintWatcher(view)
    QApplication.instance().installEventFilter(watcher)
    try:
        qtbot.waitUntil(stepper.settled, timeout=30_000)
    finally:
        QApplication.instance().removeEventFilter(watcher)
        session.frames.on_piece = None
    assert len(view.figures()) >= 3
    assert max(per_turn) <= 1, per_turn
    assert not watcher.painted, f"painted while the view said 'Drawing this stage…': {watcher.painted}"
    # shown together once drawn: in the piece that draws, each figure laid out once, not once
    # for each figure shown after it (the first of six, six times)
    assert watcher.most_resized and max(watcher.most_resized) <= 1, watcher.most_resized


def test_colour_bars_read_the_colour_map_once(qtbot, monkeypatch):
    """A colour bar is made in a turn of its own; pyqtgraph read the signed map's file again for
    each one (it never fills its cache for a file's map)."""
    from transformer_stepper.ui.plots import Heatmap
    from transformer_stepper.ui.plots.heatmap import diverging_map
    diverging_map.cache_clear()
    reads = [0]
    original = pg.colormap._getFromFile

    def counting(name):
        reads[0] += 1
        return original(name)

    monkeypatch.setattr(pg.colormap, "_getFromFile", counting)
    monkeypatch.delitem(pg.colormap._mapCache, "CET-D1A", raising=False)   # (as in the app)
    heatmaps = [Heatmap(f"h{i}", "x", "y") for i in range(3)]
    for heatmap in heatmaps:
        qtbot.addWidget(heatmap)
        heatmap.set_data(np.arange(12, dtype=np.float32).reshape(3, 4) - 6)
        heatmap.finish()
    assert reads[0] == 1
    lut = heatmaps[0].colorbar.colorMap().getLookupTable(nPts=5)
    assert np.array_equal(lut, pg.colormap.get("CET-D1A", skipCache=True).getLookupTable(nPts=5))


def test_the_idle_builder_makes_one_plot_item_a_turn(qtbot, window, long_model, monkeypatch):
    """Every stage's view built while idle, then its colour bars: one PlotItem (a figure, or a
    colour bar) a turn; a view's last build step came with a colour bar in the same turn."""
    made = [0]
    original = pg.PlotItem.__init__

    def counting(self, *args, **kwargs):
        made[0] += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(pg.PlotItem, "__init__", counting)
    open_long(qtbot, window, long_model)
    session, stepper = window.session, window.stepper
    per_turn: list[int] = []
    last = [made[0]]

    def on_piece(_key, _priority):           # (what the turn before this piece made)
        per_turn.append(made[0] - last[0])
        last[0] = made[0]

    session.frames.on_piece = on_piece
    try:
        qtbot.waitUntil(stepper.views_built, timeout=60_000)
        qtbot.waitUntil(lambda: not session.frames.pending(), timeout=60_000)
    finally:
        session.frames.on_piece = None
    per_turn.append(made[0] - last[0])
    assert sum(per_turn) >= 20, "the views were built while the test watched"
    assert max(per_turn) <= 1, per_turn
