"""The teaching corpus: a small seeded grammar whose passages make the model's insides readable.

A passage is one to three episodes, each written so that predicting the next word needs
something a person can point at:
  - pronoun:   two people of different pronoun class meet; "he" / "she" / "they" later is
               followed by a habit of that one person (the king "ruled the land", the girl
               "sang a song"), so the pronoun must find its noun;
  - ambiguous: bank, bat, light, bark, used in one of two senses that only the words before
               give away, followed by words that depend on the sense;
  - agreement: "the kings who met the girl in the garden were tired": was/were agrees with
               a subject that a relative clause and a distractor noun stand between;
  - closing:   "neither ... nor", "either ... or", "both ... and" around a long noun phrase.
Each passage keeps annotations (word positions) so tests can ask whether the model learnt them.
"""
from __future__ import annotations

import functools
import random
import re
from dataclasses import asdict, dataclass
from typing import Iterator

import numpy as np

PAD, UNK, BOS = "[PAD]", "[UNK]", "[BOS]"
SPECIAL_TOKENS = (PAD, UNK, BOS)          # ids 0, 1, 2

# singular, plural, gender, habits ("{poss}" becomes his / her / their)
PEOPLE = (
    ("king", "kings", "m", ("ruled the land", "wore a golden crown")),
    ("prince", "princes", "m", ("rode a horse", "drew {poss} sword")),
    ("boy", "boys", "m", ("kicked the ball", "climbed a tree")),
    ("father", "fathers", "m", ("built a fence", "fixed the roof")),
    ("queen", "queens", "f", ("signed the law", "greeted the guests")),
    ("princess", "princesses", "f", ("played the harp", "brushed {poss} horse")),
    ("girl", "girls", "f", ("sang a song", "read a book")),
    ("mother", "mothers", "f", ("baked bread", "planted flowers")),
)
PRONOUNS = {"m": ("he", "his"), "f": ("she", "her"), "plural": ("they", "their")}

# "[a|b]" picks one alternative; "{P}" is a person ("the king", "the girls")
MEETINGS = "{P} [met|saw|helped|visited|thanked] {Q} [in the garden|at the market|near the castle|by the old mill|in the village|on the hill] ."
FILLERS = ("it was a [cold|warm|quiet|bright] [morning|evening|day|night] .",
           "[outside|later] , the [wind|rain] [was strong|fell softly] .")
AGREEMENT = "{P} who [met|saw|helped|followed] {Q} [|in the garden|at the market|near the castle] {VERB} [happy|tired|hungry|proud|sad|angry] ."
CORRELATIVES = (("either", "or"), ("neither", "nor"), ("both", "and"))
NOUN_MODIFIERS = "[|of the town|from the hill|with the red hat|in the blue coat]"
CORRELATIVE = "{OPEN} {P} {MOD} {CLOSE} {Q} {MOD} [came to the feast|left the town|heard the news|stayed at home] ."

# word -> sense -> templates; the words before the ambiguous one give the sense away,
# the words after it depend on the sense
AMBIGUOUS = {
    "bank": {
        "river": ("{P} [sat|rested|fished|waited] on the bank [of the river|by the water|near the reeds] .",
                  "{P} rowed the boat to the bank [of the river|by the water|near the reeds] ."),
        "money": ("{P} [put|kept|saved] the [gold|coins|money] in the bank [to pay the debt|with the clerk|and asked for a loan] .",
                  "{P} borrowed [gold|coins|money] from the bank [to pay the debt|with the clerk|and asked for a loan] ."),
    },
    "bat": {
        "animal": ("{P} went into the [cave|attic|barn] and saw a bat [flying at night|hanging upside down|flapping its wings] .",
                   "at night , a bat [flew|crawled] out of the [cave|attic|barn] ."),
        "club": ("{P} went to the [game|match|field] and swung the bat [at the ball|with great force|and hit the ball] .",
                 "{P} [held|gripped] a wooden bat [at the ball|with great force|and hit the ball] ."),
    },
    "light": {
        "weight": ("the [box|bag|basket|sack] was [very|so|quite] light [and easy to carry|to lift|as air] .",
                   "{P} carried the light [box|bag|basket|sack] [home|to the market] ."),
        "lamp": ("{P} [turned on|switched off] the light [in the room|by the window|and went to sleep] .",
                 "{P} saw a [warm|soft|bright] light [in the room|by the window|through the door] ."),
    },
    "bark": {
        "dog": ("the dog gave a [loud|sharp|short] bark [at the cat|in the night|and ran away] .",
                "{P} heard a [loud|sharp|short] bark [at the cat|in the night|and ran away] ."),
        "tree": ("{P} touched the [rough|thick|dry] bark [on the trunk|covered in moss|near the roots] .",
                 "the old tree had [rough|thick|dry] bark [on the trunk|covered in moss|near the roots] ."),
    },
}

_PART = re.compile(r"\[[^\]]*\]|\{[A-Z]+\}")
_WORD = re.compile(r"[a-z]+|[.,]")


@functools.lru_cache(maxsize=None)
def _parse(template: str) -> tuple:
    """A template as parts: ("words", words), ("choice", alternatives), ("slot", name)."""
    parts = []
    at = 0
    for match in _PART.finditer(template):
        parts.append(("words", tuple(_WORD.findall(template[at:match.start()]))))
        token = match.group()
        if token.startswith("["):
            parts.append(("choice", tuple(tuple(_WORD.findall(alt)) for alt in token[1:-1].split("|"))))
        else:
            parts.append(("slot", token[1:-1]))
        at = match.end()
    parts.append(("words", tuple(_WORD.findall(template[at:]))))
    return tuple(part for part in parts if part != ("words", ()))


@dataclass(frozen=True)
class CorpusConfig:
    n_passages: int = 30000          # training passages
    max_episodes: int = 3            # episodes per passage: 1..max_episodes
    filler_probability: float = 0.5  # a filler sentence between a meeting and its pronoun
    second_pronoun_probability: float = 0.5  # the other person gets a pronoun sentence too
    distractor_opposite_probability: float = 0.8  # agreement: distractor of the other number
    episode_weights: tuple = (("pronoun", 0.35), ("ambiguous", 0.35), ("agreement", 0.15),
                              ("closing", 0.15))

    def to_dict(self) -> dict:
        data = asdict(self)
        data["episode_weights"] = [list(pair) for pair in self.episode_weights]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "CorpusConfig":
        data = dict(data)
        if "episode_weights" in data:
            data["episode_weights"] = tuple(tuple(pair) for pair in data["episode_weights"])
        return cls(**data)


@dataclass(frozen=True)
class Annotation:
    kind: str        # "pronoun", "ambiguous", "agreement", "closing"
    position: int    # word index of the pronoun / ambiguous word / verb / closing word
    source: int      # word index of what it depends on: antecedent / -1 / subject / opener
    label: str       # the pronoun, the sense ("river"), "was"/"were", the closing word


@dataclass(frozen=True)
class Passage:
    words: tuple[str, ...]
    annotations: tuple[Annotation, ...]

    @property
    def text(self) -> str:
        """Readable text (capitals, punctuation attached); it tokenizes back to `words`."""
        sentences, current = [], []
        for word in self.words:
            current.append(word)
            if word == ".":
                sentences.append(current)
                current = []
        if current:
            sentences.append(current)
        out = []
        for sentence in sentences:
            text = " ".join(sentence).replace(" .", ".").replace(" ,", ",")
            out.append(text[:1].upper() + text[1:])
        return " ".join(out)


class _Writer:
    """Builds one passage word by word, remembering where the annotated words land."""

    def __init__(self, rng: random.Random, config: CorpusConfig) -> None:
        self.rng, self.config = rng, config
        self.words: list[str] = []
        self.annotations: list[Annotation] = []

    def pick(self, options):
        return options[self.rng.randrange(len(options))]

    def write(self, template: str, slots: dict | None = None) -> dict[str, int]:
        """Append a template; returns the word index at which each {SLOT}'s head word landed."""
        where: dict[str, int] = {}
        for kind, value in _parse(template):
            if kind == "words":
                self.words.extend(value)
            elif kind == "choice":
                self.words.extend(self.pick(value))
            else:
                phrase = (slots or {})[value].split()
                self.words.extend(phrase)
                where[value] = len(self.words) - 1      # "the king" -> "king"
        return where

    def person(self, number: str | None = None):
        """-> (noun phrase, pronoun class, habits) for a random person."""
        singular, plural, gender, habits = self.pick(PEOPLE)
        number = number or self.pick(("singular", "plural"))
        if number == "plural":
            return f"the {plural}", "plural", habits
        return f"the {singular}", gender, habits

    # -- episodes ---------------------------------------------------------------------------
    def pronoun(self) -> None:
        people = []
        while len(people) < 2:
            candidate = self.person()
            if all(candidate[1] != other[1] and candidate[2] != other[2] for other in people):
                people.append(candidate)
        at = self.write(MEETINGS, {"P": people[0][0], "Q": people[1][0]})
        positions = [at["P"], at["Q"]]
        if self.rng.random() < self.config.filler_probability:
            self.write(self.pick(FILLERS))
        order = [0, 1] if self.rng.random() < 0.5 else [1, 0]
        if self.rng.random() >= self.config.second_pronoun_probability:
            order = order[:1]
        for index in order:
            _, pronoun_class, habits = people[index]
            pronoun, possessive = PRONOUNS[pronoun_class]
            habit = self.pick(habits).replace("{poss}", possessive)
            where = self.write("{PRON} " + habit + " .", {"PRON": pronoun})
            self.annotations.append(Annotation("pronoun", where["PRON"], positions[index], pronoun))

    def ambiguous(self) -> None:
        word = self.pick(sorted(AMBIGUOUS))
        sense = self.pick(sorted(AMBIGUOUS[word]))
        template = self.pick(AMBIGUOUS[word][sense])
        start = len(self.words)
        self.write(template, {"P": self.person()[0]})
        position = start + self.words[start:].index(word)
        self.annotations.append(Annotation("ambiguous", position, -1, f"{word}:{sense}"))

    def agreement(self) -> None:
        subject_number = self.pick(("singular", "plural"))
        opposite = "plural" if subject_number == "singular" else "singular"
        distractor_number = (opposite if self.rng.random() < self.config.distractor_opposite_probability
                             else subject_number)
        verb = "were" if subject_number == "plural" else "was"
        at = self.write(AGREEMENT, {"P": self.person(subject_number)[0],
                                    "Q": self.person(distractor_number)[0], "VERB": verb})
        self.annotations.append(Annotation("agreement", at["VERB"], at["P"], verb))

    def closing(self) -> None:
        opener, closer = self.pick(CORRELATIVES)
        template = CORRELATIVE.replace("{MOD}", NOUN_MODIFIERS, 1).replace("{MOD}", NOUN_MODIFIERS, 1)
        at = self.write(template, {"OPEN": opener, "CLOSE": closer,
                                   "P": self.person()[0], "Q": self.person()[0]})
        self.annotations.append(Annotation("closing", at["CLOSE"], at["OPEN"], closer))


def generate(n_passages: int, seed: int, config: CorpusConfig = CorpusConfig()) -> list[Passage]:
    """`n_passages` passages; the same (n_passages, seed, config) always gives the same list."""
    return list(iter_passages(n_passages, seed, config))


def iter_passages(n_passages: int, seed: int, config: CorpusConfig = CorpusConfig()) -> Iterator[Passage]:
    # random.Random: a documented, platform-independent stream, and fast for scalar picks
    rng = random.Random(seed)
    kinds = [kind for kind, _ in config.episode_weights]
    weights = [float(w) for _, w in config.episode_weights]
    for _ in range(n_passages):
        writer = _Writer(rng, config)
        for _ in range(rng.randint(1, config.max_episodes)):
            getattr(writer, rng.choices(kinds, weights)[0])()
        yield Passage(tuple(writer.words), tuple(writer.annotations))


def lexicon() -> list[str]:
    """Every word the grammar can produce, sorted (the vocabulary does not depend on a seed)."""
    texts = [MEETINGS, AGREEMENT, CORRELATIVE, NOUN_MODIFIERS, "was were", *FILLERS]
    for singular, plural, _, habits in PEOPLE:
        texts += [singular, plural, *habits]
    texts += [" ".join(pair) for pair in PRONOUNS.values()]
    texts += [" ".join(pair) for pair in CORRELATIVES]
    texts += [t for senses in AMBIGUOUS.values() for ts in senses.values() for t in ts]
    texts.append("the dog")
    words = set()
    for text in texts:
        words.update(_WORD.findall(re.sub(r"\{[a-zA-Z]+\}", " ", text.replace("|", " "))))
    return sorted(words)


def word_level_tokenizer(words, special_tokens, unk: str, marker: str, marker_first: bool):
    """A word-level `tokenizers.Tokenizer`: the special tokens then `words`, lowercase, split on
    whitespace and punctuation, unknown words -> `unk`, and `marker` before every text
    (marker_first) or after it (the built-in model's [BOS]; the translator's </s>)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    vocab = {token: index for index, token in enumerate(special_tokens)}
    for word in words:
        vocab[word] = len(vocab)
    tokenizer = Tokenizer(WordLevel(vocab, unk_token=unk))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    single, pair = (f"{marker} $A", f"{marker} $A $B") if marker_first else (f"$A {marker}", f"$A {marker} $B")
    tokenizer.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=[(marker, vocab[marker])])
    tokenizer.add_special_tokens(list(special_tokens))
    return tokenizer


def build_tokenizer():
    """The built-in model's word-level tokenizer over `lexicon()`: unknown words -> [UNK], and
    [BOS] in front of every text."""
    return word_level_tokenizer(lexicon(), SPECIAL_TOKENS, UNK, BOS, marker_first=True)


def encode(tokenizer, passages: list[Passage]) -> list[np.ndarray]:
    """Passages -> int64 id arrays ([BOS] first), through the tokenizer the app will use."""
    encodings = tokenizer.encode_batch([p.text for p in passages])
    return [np.asarray(e.ids, dtype=np.int64) for e in encodings]


# ------------------------------------------------------------------------------ word classes
# What each vocabulary word is in the grammar, for colouring the embedding table: people,
# pronouns and ambiguous words come from the tables above; the other lists name the words the
# templates use in those roles. Nouns that are none of these are "things".
WORD_CLASSES = ("people", "pronouns", "verbs", "places", "ambiguous", "function words",
                "descriptions", "things", "special")
_VERBS = frozenset("""met saw helped visited thanked followed was were ruled wore rode drew kicked
    climbed built fixed signed greeted played brushed sang read baked planted sat rested fished
    waited rowed put kept saved borrowed asked went flew crawled swung held gripped hit carried
    turned switched touched had gave heard came left stayed fell lift carry pay flying hanging
    flapping covered ran""".split())
_PLACES = frozenset("""garden market castle mill village hill town river water reeds cave attic
    barn field room window door home land""".split())
_FUNCTION = frozenset("""the a of in at on by near to and or nor either neither both who with from
    into through out off as so very quite for down upside away later outside it its , .""".split())
_DESCRIPTIONS = frozenset("""cold warm quiet bright happy tired hungry proud sad angry red blue golden
    old rough thick dry loud sharp short soft softly wooden great easy strong""".split())


def word_class(word: str) -> str:
    """The class of a vocabulary word (one of WORD_CLASSES)."""
    if word in SPECIAL_TOKENS:
        return "special"
    if word in AMBIGUOUS:
        return "ambiguous"
    if any(word in (singular, plural) for singular, plural, _, _ in PEOPLE):
        return "people"
    if any(word in pair for pair in PRONOUNS.values()):
        return "pronouns"
    for name, words in (("verbs", _VERBS), ("places", _PLACES), ("function words", _FUNCTION),
                        ("descriptions", _DESCRIPTIONS)):
        if word in words:
            return name
    return "things"


def vocabulary_classes(tokenizer) -> list[str]:
    """Per token id, its word class."""
    return [word_class(tokenizer.id_to_token(i))
            for i in range(tokenizer.get_vocab_size(with_added_tokens=True))]
