"""What outlives a change and what does not, decided one by one: the selected token follows a
chosen token while the text up to it is unchanged and otherwise goes to the new default; a hover
readout goes when its plot redraws; the softmax what-if temperature goes with its trace (new
text, a generation step, another model); Recent Models forgets models that are gone and shows
long paths as "…/a/b/c", never as a relative-looking "a/b/c"."""
from __future__ import annotations

from PySide6.QtCore import QSettings

from transformer_stepper.core.analysis.labels import default_token
from transformer_stepper.ui.menus.model_menu import RecentMenu, RecentModels, _short
from transformer_stepper.ui.stages.base import READOUT_HINT

TIMEOUT = 15_000


def retype(qtbot, session, text: str) -> None:
    with qtbot.waitSignal(session.traceChanged, timeout=TIMEOUT):
        session.set_text(text, immediate=True)


def test_the_selection_follows_its_token_or_goes_to_the_default(qtbot, loaded_window):
    session = loaded_window("gpt2").session             # causal: the default is the last token
    assert session.selected_token == default_token(session.trace) == session.trace.n_seq - 1
    retype(qtbot, session, session.text + " and")       # the default follows the new last token
    assert session.selected_token == session.trace.n_seq - 1
    session.select_token(1)                             # chosen: kept while typing after it
    word = session.token_labels()[1]
    retype(qtbot, session, session.text + " the")
    assert session.selected_token == 1 and session.token_labels()[1] == word
    retype(qtbot, session, "a" + session.text)          # an edit before it: the new default
    assert session.selected_token == session.trace.n_seq - 1
    session.select_token(2)
    retype(qtbot, session, "x")                         # shorter than the selection: the default
    assert session.selected_token == default_token(session.trace)


def test_a_hover_readout_goes_when_its_plot_redraws(qtbot, loaded_window):
    window = loaded_window("bert")
    session = window.session
    session.set_stage("softmax")
    view = window.stepper.current_view()
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    view.row.hovered.emit("key 2 'bank': weight 0.31")
    assert view.readout.text() == "key 2 'bank': weight 0.31"
    session.select_token(3)                             # other bars: the old value would lie
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    assert view.readout.text() == READOUT_HINT
    view.row.hovered.emit("key 2 'bank': weight 0.31")
    retype(qtbot, session, "the river bank")
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    assert view.readout.text() == READOUT_HINT


def test_the_softmax_what_if_goes_with_its_trace(qtbot, loaded_window, model_paths):
    window = loaded_window("gpt2")
    session = window.session
    session.set_stage("softmax")
    view = window.stepper.current_view()
    session.set_temperature(3.0)
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    assert "what-if" in view.temperature_label.text()
    with qtbot.waitSignal(session.traceChanged, timeout=TIMEOUT):      # a generation step
        assert window.generate_bar.next_action.isEnabled()
        window.generate_bar.next_action.trigger()
    qtbot.waitUntil(lambda: not session.generation.running, timeout=TIMEOUT)
    assert session.temperature == 1.0
    qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
    assert "the model's own weights" in view.temperature_label.text()
    assert view.slider.value() == view.slider.maximum() // 2
    session.set_temperature(0.5)
    retype(qtbot, session, "the bank")                               # typing
    assert session.temperature == 1.0
    session.set_temperature(0.5)
    with qtbot.waitSignal(session.traceChanged, timeout=TIMEOUT):      # another model
        window.open_model(str(model_paths["llama"]))
    assert session.temperature == 1.0


def test_recent_models_forget_what_is_gone_and_keep_the_root(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    recent = RecentModels(settings)
    kept = tmp_path / "deep" / "er" / "models" / "bert"
    kept.mkdir(parents=True)
    gone = tmp_path / "snapshots" / "quick-seed0-step0"
    gone.mkdir(parents=True)
    for path in (kept, gone):
        recent.add(str(path))
    gone.rmdir()                                           # the app that wrote it quit
    menu = RecentMenu(recent, lambda path: None)
    qtbot.addWidget(menu)
    menu.refresh()
    models = [a for a in menu.actions() if a.statusTip()]
    assert [a.statusTip() for a in models] == [str(kept)]
    assert recent.paths() == [str(kept)]
    assert models[0].text() == "…/er/models/bert" and models[0].isEnabled()
    assert _short("/models/bert") == "/models/bert" and _short("/a/b/c/d/e") == "…/c/d/e"
