"""Every explanation the app writes is a finished sentence: on each fixture family (and the
built-in model), every stage at the first and the last layer, for a token that occurs once and one
that occurs twice, and the Compare, Positions, Attribution and Interventions tabs, Training before
and after a run (scrubbed to step 0), and Help → What Am I Looking At?. None may hold an unfilled
placeholder, a brace, a dash or an ellipsis standing in for a number, "None", "(s)" or sums left
for the reader ("14 − 1")."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from transformer_stepper.core.model import stages
from transformer_stepper.io.resources import builtin_model_dir, resources_dir
from transformer_stepper.ui.menus import help as help_menu

FIXTURES = Path(__file__).parents[1] / "fixtures"
FAMILIES = ["bert_tiny_mlm", "gpt2_tiny_lm", "llama_tiny", "mistral_tiny", "qwen2_tiny", "qwen3_tiny",
            "gemma_tiny", "roberta_tiny", "distilbert_tiny", "builtin", "concat"]
TEXT = "the bank of the river"           # 'the' twice: a word with a twin, 'bank' without
TIMEOUT = 15_000

# a dash or an ellipsis between two words or numbers is prose ("0 … 13", "x — y"); one after a
# word is "computing…"; anything else (": —", "**…**", "position —;") stands in for a number
_PROSE = re.compile(r"(?<=[\w)\]'\"’`*]) [—…] (?=[\w(\['\"‘`*−-])|(?<=\w)…")
_BAD = [(re.compile(r"(?<!')[{}]|[{}](?!')"), "a brace (unfilled placeholder)"),     # '}': a token
        (re.compile(r"\bNone\b"), "None"),
        (re.compile(r"(?<!softmax)\(s\)"), "a '(s)' plural"),
        (re.compile(r"\d+ − 1\b"), "arithmetic left undone"),
        (re.compile(r"\bnan\b"), "nan")]


def problems(text: str) -> list[str]:
    found = [f"{what}: …{text[max(m.start() - 40, 0):m.end() + 20]!r}…"
             for pattern, what in _BAD for m in pattern.finditer(text)]
    prose = {m.start() for m in _PROSE.finditer(text)} | {m.start() + 1 for m in _PROSE.finditer(text)}
    for m in re.finditer(r"[—…]", text):
        if m.start() not in prose:
            found.append(f"a stand-in {m.group()}: …{text[max(m.start() - 40, 0):m.end() + 20]!r}…")
    return found


def test_the_checker_catches_the_leftovers_of_issue_24():
    for bad in ("also appears at position —; cosine between the two after this layer: —",
                "cosine {cos_x0}", "x₀ = `[… × …]`", "integers in 0 … 14 − 1", "appears 1 time(s)",
                "the value None", "cosine **…**"):
        assert problems(bad), bad
    for good in ("integers in 0 … 13", "Computing layer 0…", "the embeddings — the rows", "p = 0.25"):
        assert not problems(good), good


def model_path(family: str):
    if family == "builtin":
        if not (builtin_model_dir() / "config.json").is_file():
            pytest.skip("the built-in model is not there yet")
        return None
    if family == "concat":                      # the positions laboratory's [e | p] variant
        return str(resources_dir() / "positions" / "concat")
    return str(FIXTURES / family)


def stage_texts(qtbot, window):
    """(where, text) of every stage's explanation: first and last layer, both tokens."""
    session = window.session
    config = session.model.config
    labels = session.token_labels()
    twin = next((i for i, t in enumerate(labels) if labels.count(t) > 1), 0)
    single = next((i for i, t in enumerate(labels) if labels.count(t) == 1), 0)
    for stage in stages.available_stages(config):
        session.set_stage(stage.key)
        for layer in sorted({0, config.n_layer - 1} if stage.per_layer else {session.layer}):
            session.set_layer(layer)
            for token in (twin, single):
                session.select_token(token)
                view = window.stepper.current_view()
                qtbot.waitUntil(view.is_current, timeout=TIMEOUT)
                window.stepper.update_explanation()
                yield f"{stage.key} layer {layer} token {token}", window.stepper.explanation.toPlainText()


def tab_texts(qtbot, window):
    session = window.session
    compare = window.tabs.view("compare")
    with qtbot.waitSignal(compare.updated, timeout=TIMEOUT):
        window.tabs.show_tab("compare")
    yield "compare (preset)", compare.explanation.toPlainText()
    for lines, word in (([TEXT], "the"), ([TEXT, "the river"], "river"), (["a b c"], "zzz")):
        with qtbot.waitSignal(compare.updated, timeout=TIMEOUT):
            compare.set_sentences(lines, word)
        yield f"compare {lines} {word}", compare.explanation.toPlainText()
    positions = window.tabs.view("positions")
    with qtbot.waitSignal(positions.yourModelShown, timeout=TIMEOUT):
        window.tabs.show_tab("positions")
    yield "positions", positions.explanation.toPlainText() + "\n" + positions.your_model_line.text()
    attribution = window.tabs.show_tab("attribution")
    qtbot.waitUntil(lambda: "Computing" not in attribution.message.text(), timeout=TIMEOUT)
    yield "attribution", attribution.message.text() + "\n" + attribution.summary.text()
    interventions = window.tabs.show_tab("interventions")
    yield "interventions (none)", "\n".join((interventions.summary.text(), interventions.chips.text(),
                                             interventions.empty.text()))
    with qtbot.waitSignal(interventions.resultReady, timeout=TIMEOUT):
        interventions.set_head_ablated(0, 1)
    yield "interventions (a head)", interventions.summary.text() + "\n" + interventions.chips.text()
    interventions.clear_all()
    qtbot.waitUntil(lambda: not session.interventions, timeout=TIMEOUT)
    window.tabs.show_tab("stepper")


@pytest.mark.parametrize("family", FAMILIES)
def test_every_explanation_is_filled_in(qtbot, window, family):
    path = model_path(family)
    window.session.set_text(TEXT, immediate=True)
    with qtbot.waitSignal(window.session.traceChanged, timeout=TIMEOUT):
        window.open_model(path)
    found = []
    for where, text in list(stage_texts(qtbot, window)) + list(tab_texts(qtbot, window)):
        assert text.strip(), where
        found += [f"{family} {where}: {p}" for p in problems(text)]
    assert not found, "\n".join(dict.fromkeys(found))
    assert window.errors == []


def test_help_what_am_i_looking_at_has_no_stand_ins(qtbot, window):
    from PySide6.QtGui import QTextDocument

    document = QTextDocument()
    document.setHtml(help_menu.guide_html())
    text = document.toPlainText()
    assert "Tokenize" in text and "Logit lens" in text
    assert not problems(text), "\n".join(problems(text))


def test_training_explanation_before_during_and_after_a_scrub(qtbot, monkeypatch):
    from transformer_stepper.core.training import corpus
    from transformer_stepper.core.training.recipe import QUICK
    from transformer_stepper.ui.training import TrainingView
    from transformer_stepper.ui.training import worker as worker_module

    tiny = QUICK.replace(steps=30, n_heldout=20, batch_size=8, d_model=16, d_ff=32, n_layer=1,
                         corpus=corpus.CorpusConfig(n_passages=150, max_episodes=1))
    monkeypatch.setattr(worker_module, "FRAME_SECONDS", 0.0)
    view = TrainingView(open_in_stepper=lambda path: None, recipes={"quick": tiny})
    qtbot.addWidget(view)
    view.show()
    texts = {"before": view.explanation.toPlainText()}
    with qtbot.waitSignal(view.runEnded, timeout=30_000):
        view.start()
    texts["after"] = view.explanation.toPlainText()
    view.slider.setValue(0)
    texts["step 0"] = scrubbed = view.explanation.toPlainText()
    history = view.outcome.history
    assert f"snapshot of step {history.snapshot_steps[0]}" in scrubbed
    assert f"is {history.separation[0]:.3f} at step {history.snapshot_steps[0]}, the first snapshot" in scrubbed
    assert f"Step {tiny.steps} of {tiny.steps}" in texts["after"] and "snapshot of step" not in texts["after"]
    found = [f"{when}: {p}" for when, text in texts.items() for p in problems(text)]
    assert not found, "\n".join(found)
    assert view.shutdown(10_000)
