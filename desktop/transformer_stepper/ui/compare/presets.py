"""Ready comparisons: the built-in model's ambiguous words (every word of these sentences is in
its vocabulary, and they read as English to any other model), and the user's own, kept in the
app's settings."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from PySide6.QtCore import QSettings

SETTINGS_KEY = "compare/presets"


@dataclass(frozen=True)
class Preset:
    name: str
    word: str
    sentences: tuple[str, ...]
    builtin: bool = True


BUILTIN: tuple[Preset, ...] = (
    Preset("bank: river vs money", "bank", (
        "He sat on the bank of the river .",
        "He rowed the boat to the bank by the water .",
        "She kept the gold in the bank with the clerk .",
        "He borrowed money from the bank to pay the debt .")),
    Preset("bat: animal vs club", "bat", (
        "She went into the cave and saw a bat flying at night .",
        "At night , a bat flew out of the barn .",
        "He went to the game and swung the bat at the ball .",
        "She gripped a wooden bat with great force .")),
    Preset("light: weight vs lamp", "light", (
        "The box was very light and easy to carry .",
        "He carried the light bag to the market .",
        "She turned on the light in the room .",
        "He saw a warm light through the door .")),
    Preset("bark: dog vs tree", "bark", (
        "The dog gave a loud bark at the cat .",
        "She heard a sharp bark in the night .",
        "He touched the rough bark on the trunk .",
        "The old tree had thick bark covered in moss .")),
)


def user_presets(settings: Optional[QSettings]) -> list[Preset]:
    if settings is None:
        return []
    raw = settings.value(SETTINGS_KEY, "[]")
    try:
        entries = json.loads(raw if isinstance(raw, str) else "[]")
    except ValueError:
        return []
    presets = []
    for entry in entries if isinstance(entries, list) else []:
        try:
            presets.append(Preset(str(entry["name"]), str(entry["word"]),
                                  tuple(str(s) for s in entry["sentences"]), builtin=False))
        except (KeyError, TypeError):
            continue                    # a hand-edited settings file: skip what does not read
    return presets


def _store(settings: QSettings, presets: list[Preset]) -> None:
    settings.setValue(SETTINGS_KEY, json.dumps(
        [{"name": p.name, "word": p.word, "sentences": list(p.sentences)} for p in presets]))
    settings.sync()


def save_preset(settings: QSettings, name: str, word: str, sentences: list[str]) -> Preset:
    """Keep (or replace, by name) one of the user's comparisons."""
    preset = Preset(name.strip(), word.strip(), tuple(s for s in sentences if s.strip()), builtin=False)
    kept = [p for p in user_presets(settings) if p.name != preset.name]
    _store(settings, kept + [preset])
    return preset


def remove_preset(settings: QSettings, name: str) -> None:
    _store(settings, [p for p in user_presets(settings) if p.name != name])


def all_presets(settings: Optional[QSettings]) -> list[Preset]:
    return list(BUILTIN) + user_presets(settings)
