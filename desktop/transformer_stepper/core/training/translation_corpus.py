"""The built-in translator's corpus: English-like sentences and their translation into a made-up
language ("Velan") that reorders them, each target word tagged with the source word it
translates (the alignment the cross-attention measure reads).

Velan puts the adjective after its noun ("the red cat" -> "la kato ruga"), the verb at the end
of the clause ("the dog saw the cat" -> "la hundo la kato vidis"), and a postposition after its
noun phrase ("near the river" -> "la rivo apud"). English "bank" has two Velan words: "bordo"
(the river's) and "kaso" (the money's), chosen by the other nouns in the sentence."""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from .corpus import word_level_tokenizer

EOS, UNK, PAD = "</s>", "<unk>", "<pad>"
SPECIAL_TOKENS = (EOS, UNK, PAD)           # ids 0, 1, 2 (Marian's order: eos 0, pad = start)

NOUNS = {"dog": "hundo", "cat": "kato", "bird": "birdo", "man": "viro", "woman": "ino",
         "child": "ido", "king": "rego", "horse": "ceva", "farmer": "terkul", "boat": "boto",
         "tree": "arbo", "house": "domo"}
RIVER_NOUNS = {"river": "rivo", "fish": "fiso"}          # make "bank" the river's bank
MONEY_NOUNS = {"money": "mono", "clerk": "kleko"}        # make "bank" the money's bank
BANK = {"river": "bordo", "money": "kaso"}
ADJECTIVES = {"big": "granda", "small": "eta", "red": "ruga", "old": "olda", "young": "juna",
              "happy": "gaja", "green": "verda", "dark": "nigra"}
VERBS = {"saw": "vidis", "helped": "helpis", "found": "trovis", "followed": "sekvis",
         "liked": "amis", "visited": "vizitis"}
FUNCTION = {"the": "la", "near": "apud", ".": "."}


@dataclass(frozen=True)
class Pair:
    source: list[str]               # source words ("." included)
    target: list[str]               # target words
    align: list[int]                # per target word, the index of its source word

    @property
    def source_text(self) -> str:
        return " ".join(self.source)

    @property
    def target_text(self) -> str:
        return " ".join(self.target)


class _Sentence:
    def __init__(self, rng: random.Random, adjective_probability: float) -> None:
        self.rng, self.p_adj = rng, adjective_probability
        self.source: list[str] = []

    def noun_phrase(self, noun: str, translation: str) -> list[tuple[str, int]]:
        """Writes 'the [adj] noun' in the source; returns Velan 'la noun [adj]' with alignments."""
        start = len(self.source)
        adjective = self.rng.choice(sorted(ADJECTIVES)) if self.rng.random() < self.p_adj else None
        self.source += ["the"] + ([adjective] if adjective else []) + [noun]
        out = [("la", start), (translation, len(self.source) - 1)]
        return out + ([(ADJECTIVES[adjective], start + 1)] if adjective else [])


def make_pair(rng: random.Random, adjective_probability: float = 0.5, bank_probability: float = 0.3,
              pp_probability: float = 0.5) -> Pair:
    s = _Sentence(rng, adjective_probability)
    plain = sorted(NOUNS)
    bank_kind = rng.choice(("river", "money")) if rng.random() < bank_probability else None
    context = RIVER_NOUNS if bank_kind == "river" else MONEY_NOUNS if bank_kind else {}
    other = {**RIVER_NOUNS, **MONEY_NOUNS}
    roles = ["subject", "object"]
    bank_role = rng.choice(roles) if bank_kind else None
    pp = bank_kind is not None or rng.random() < pp_probability

    def noun_for(role):
        if role == bank_role:
            return "bank", BANK[bank_kind]
        word = rng.choice(plain)
        return word, NOUNS[word]

    subject = s.noun_phrase(*noun_for("subject"))
    verb = rng.choice(sorted(VERBS))
    verb_at = len(s.source)
    s.source.append(verb)
    obj = s.noun_phrase(*noun_for("object"))
    target = subject + obj
    if pp:
        near_at = len(s.source)
        s.source.append("near")
        # with "bank", the place names its kind; otherwise any noun, but not one that would
        # tell the opposite kind (a sentence has no bank then, so any noun is fine)
        pool = context if bank_kind else {**NOUNS, **other}
        word = rng.choice(sorted(pool))
        target += s.noun_phrase(word, pool[word]) + [("apud", near_at)]
    target.append((VERBS[verb], verb_at))
    s.source.append(".")
    target.append((".", len(s.source) - 1))
    return Pair(s.source, [w for w, _ in target], [i for _, i in target])


def generate(n: int, seed: int, **kwargs) -> list[Pair]:
    rng = random.Random(seed)
    return [make_pair(rng, **kwargs) for _ in range(n)]


def lexicon() -> list[str]:
    words = set()
    for table in (NOUNS, RIVER_NOUNS, MONEY_NOUNS, ADJECTIVES, VERBS, FUNCTION):
        words.update(table)
        words.update(table.values())
    words.update(BANK.values())
    words.add("bank")
    return sorted(words)


def build_tokenizer():
    """A word-level tokenizer shared by both languages (as Marian shares one vocabulary):
    lowercase, split on whitespace and punctuation, </s> after every text."""
    return word_level_tokenizer(lexicon(), SPECIAL_TOKENS, UNK, EOS, marker_first=False)


def encode_pairs(tokenizer, pairs: list[Pair]) -> list[tuple[np.ndarray, np.ndarray]]:
    """-> (source ids ending in </s>, target ids ending in </s>) per pair, through the tokenizer
    the app uses; every word is one token, so pair.align indexes the source ids."""
    src = tokenizer.encode_batch([p.source_text for p in pairs])
    tgt = tokenizer.encode_batch([p.target_text for p in pairs])
    out = []
    for pair, s, t in zip(pairs, src, tgt):
        if len(s.ids) != len(pair.source) + 1 or len(t.ids) != len(pair.target) + 1:
            raise ValueError(f"translator corpus: {pair.source_text!r} is not one token per word")
        out.append((np.asarray(s.ids, np.int64), np.asarray(t.ids, np.int64)))
    return out
