"""The same word in several sentences: is its embedding static or contextual?

    from transformer_stepper import compare, load_model
    result = compare(load_model(), "bank", ["she sat by the bank of the river",
                                            "the bank lent money to the farmers"])
    result.lookup_difference     # [k, d_model] row of E minus the first occurrence's: 0 for equal ids
    result.pair_cosines          # [n_layer + 1, n_pairs] cosine of the hidden states, layer by layer
    result.self_cosines          # [n_layer + 1, k] each occurrence against its own layer-0 vector

Every number comes from each sentence's trace (`trace.hidden_states`, the lookup rows), so it
is what the stepper shows for that sentence."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from .errors import ModelError
from .model import Model
from .trace import Trace

MAX_SENTENCES = 8
_PIECE_MARKS = ("Ġ", "▁", "##", " ")


@dataclass(frozen=True)
class Occurrence:
    sentence: int            # index into the texts given
    text: str
    position: int            # token index in that sentence's trace
    piece: str               # the tokenizer's piece
    token_id: int
    split: bool              # the word is several pieces; this is the first


@dataclass
class Comparison:
    word: str
    occurrences: list[Occurrence]
    traces: list[Trace] = field(repr=False)
    problems: list[str]                  # one line per sentence left out, or a note
    lookup_rows: np.ndarray              # [k, d_model] rows of E
    lookup_difference: np.ndarray        # [k, d_model] each row minus the first occurrence's
    pairs: list[tuple[int, int]]         # occurrence index pairs
    pair_cosines: np.ndarray             # [n_layer + 1, n_pairs]
    self_cosines: np.ndarray             # [n_layer + 1, k]

    def hidden(self, k: int) -> np.ndarray:
        """[n_layer + 1, d_model]: occurrence k's vector at every hidden-state index."""
        occurrence = self.occurrences[k]
        return self.traces[k].hidden_states[:, occurrence.position]

    def separates_at(self, threshold: float = 0.9) -> Optional[int]:
        """The first hidden-state index where some pair's cosine falls below threshold."""
        below = np.nonzero((self.pair_cosines < threshold).any(axis=1))[0]
        return int(below[0]) if len(below) else None


def _bare(piece: str) -> str:
    for mark in _PIECE_MARKS:
        piece = piece.replace(mark, "")
    return piece.lower()


def find_word(trace: Trace, word: str) -> Optional[tuple[int, bool]]:
    """(position, split) of the first occurrence of `word` on the tokenizer's pieces, matched
    without the word-start marks ('bank' finds bank, Ġbank, ▁bank); a word split into pieces
    is found by its first piece (split=True). None when it is not there."""
    target = word.strip().lower()
    pieces = [_bare(t) for t in trace.tokens]
    for i, piece in enumerate(pieces):
        if trace.special_tokens_mask[i] or not piece:
            continue
        if piece == target:
            return i, False
        joined = piece
        for j in range(i + 1, len(pieces)):
            if trace.tokens[j].startswith(("Ġ", "▁")) or not pieces[j] or not target.startswith(joined):
                break
            joined += pieces[j]
            if joined == target:
                return i, True
    return None


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # [..., d] x2 -> [...], in float64 so the tiny differences are not rounding
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-30)


def compare(model: Model, word: str, texts: Sequence[str]) -> Comparison:
    if not isinstance(word, str) or not word.strip():
        raise ModelError("compare: type the word to follow")
    sentences = [t for t in texts if isinstance(t, str) and t.strip()]
    if len(sentences) > MAX_SENTENCES:
        raise ModelError(f"compare: at most {MAX_SENTENCES} sentences, got {len(sentences)}")
    occurrences, traces, problems = [], [], []
    for index, text in enumerate(sentences):
        trace = model.trace(text)
        found = find_word(trace, word)
        if found is None:
            problems.append(f"sentence {index + 1} ({text!r}): {word!r} is not among its tokens")
            continue
        position, split = found
        if split:
            problems.append(f"sentence {index + 1}: {word!r} is split into pieces; the first, "
                            f"{trace.tokens[position]!r}, is followed")
        occurrences.append(Occurrence(index, text, position, trace.tokens[position],
                                      int(trace.input_ids[position]), split))
        traces.append(trace)
    if len(occurrences) < 2:
        raise ModelError("compare: the word must be found in at least two sentences"
                         + (f" ({'; '.join(problems)})" if problems else ""))
    ids = np.array([o.token_id for o in occurrences])
    lookup = np.stack([t["token_embeddings"][o.position] for t, o in zip(traces, occurrences)])
    hidden = np.stack([t.hidden_states[:, o.position] for t, o in zip(traces, occurrences)], axis=1)
    pairs = [(a, b) for a in range(len(occurrences)) for b in range(a + 1, len(occurrences))]
    pair_cosines = np.stack([cosine(hidden[:, a], hidden[:, b]) for a, b in pairs], axis=1)
    self_cosines = cosine(hidden, hidden[:1])
    assert ids.shape[0] == lookup.shape[0]
    return Comparison(word, occurrences, traces, problems, lookup, lookup - lookup[:1], pairs,
                      pair_cosines.astype(np.float32), self_cosines.astype(np.float32))


def csv_rows(result: Comparison) -> list[list[str]]:
    """compare.csv: one row per hidden-state index; a column per pair (cosine), then one per
    occurrence (cosine to its own layer-0 vector)."""
    header = ["hidden_state"]
    header += [f"cos s{result.occurrences[a].sentence + 1}-s{result.occurrences[b].sentence + 1}"
               for a, b in result.pairs]
    header += [f"self s{o.sentence + 1}" for o in result.occurrences]
    rows = [header]
    for index in range(result.pair_cosines.shape[0]):
        label = "embedding" if index == 0 else f"layer {index - 1}"
        rows.append([label] + [repr(float(v)) for v in result.pair_cosines[index]]
                    + [repr(float(v)) for v in result.self_cosines[index]])
    return rows
