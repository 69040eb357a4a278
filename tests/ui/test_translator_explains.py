"""The translator window explains itself: every stage has its text under a note on the encoder
(once) or the decoder (a token at a time), cross-attention has its own, and the built-in
translator has a page on Velan whose rules are checked here against the generator that wrote
its training pairs (an independent rewrite of English into Velan by those rules)."""
import re

from PySide6.QtCore import Qt

from transformer_stepper.core.training import translation_corpus as velan
from transformer_stepper.io.resources import builtin_translator_dir
from transformer_stepper.ui.seq2seq.explain import example_pairs
from transformer_stepper.ui.seq2seq.window import TranslationWindow


def _by_the_rules(source: list) -> list:
    """English words -> Velan by the page's rules: la noun [adjective] per noun phrase, the
    phrase after "near" followed by apud, the verb last before the full stop, bank by context."""
    lexicon = {**velan.NOUNS, **velan.RIVER_NOUNS, **velan.MONEY_NOUNS}
    bank = "bordo" if set(source) & set(velan.RIVER_NOUNS) else "kaso"
    phrases, verb, words = [], None, source[:-1]
    i = 0
    while i < len(words):
        if words[i] in velan.VERBS:
            verb, i = velan.VERBS[words[i]], i + 1
            continue
        near = words[i] == "near"
        i += near
        assert words[i] == "the"
        adjective = velan.ADJECTIVES.get(words[i + 1])
        noun = words[i + 2] if adjective else words[i + 1]
        phrase = ["la", bank if noun == "bank" else lexicon[noun]] + ([adjective] if adjective else [])
        phrases.append(phrase + (["apud"] if near else []))
        i += 3 if adjective else 2
    return [w for phrase in phrases for w in phrase] + [verb, "."]


def test_the_generator_follows_the_pages_rules():
    for pair in velan.generate(500, 11):
        assert pair.target == _by_the_rules(pair.source), pair.source_text
    for pair in example_pairs():
        assert pair.target == _by_the_rules(pair.source)


def _item(window, text):
    found = window.stage_list.findItems(text, Qt.MatchFlag.MatchContains | Qt.MatchFlag.MatchRecursive)
    return found


def test_each_stage_and_velan_explained(qtbot):
    window = TranslationWindow("the old man saw the red bank near the river .")
    qtbot.addWidget(window)
    window.open_model(str(builtin_translator_dir()))
    qtbot.waitUntil(lambda: window.trace is not None, timeout=20_000)
    qtbot.waitUntil(lambda: "Cross-attention" in window.explanation.toPlainText(), timeout=20_000)
    assert "encoder's output" in window.explanation.toPlainText()
    for position, section in ((0, "Encoder"), (1, "Decoder")):
        window.stage_list.setCurrentItem(_item(window, "7. Softmax")[position])
        qtbot.waitUntil(lambda: "Selected query" in window.explanation.toPlainText(), timeout=20_000)
        text = window.explanation.toPlainText()
        assert text.startswith(f"{section}: 7. Softmax")
        assert ("runs once" if section == "Encoder" else "one token at a time") in text
        assert not re.search(r"\{\w+\}", text)                   # every number filled in
    window.stage_list.setCurrentItem(_item(window, "Velan")[0])
    page = window.velan_page.toPlainText()
    for rule in ("adjective comes after its noun", "end of the clause", "apud", "bordo", "kaso"):
        assert rule in page
    for pair in example_pairs():
        assert f"{pair.source_text} → {pair.target_text}" in page
    window.close()
    window.workers.wait()
