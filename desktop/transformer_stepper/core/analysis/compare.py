"""Compare contexts: the same word in 2–8 sentences, through one model.

    from transformer_stepper import compare, load_model
    result = compare(load_model(), ["He sat on the bank of the river .",
                                    "She kept the gold in the bank with the clerk ."], "bank")
    result.pair_cosines      # [n_pairs, n_layer + 1]: cosine of the two hidden states per index
    result.self_cosines      # [n_occurrences, n_layer + 1]: each one's cosine to its own state 0

Each sentence is traced on its own; in each, one token is compared (the first occurrence of
the word, matched on the tokenizer's pieces, or a position chosen by hand). Everything else is
computed from the hidden states of those traces: the lookup rows, what enters layer 0, the
cosines per hidden-state index, a 2-D map per index (PCA over every ordinary token of the
sentences), and each occurrence's nearest tokens. Numbers only: no Qt, no file formats."""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Mapping, Optional, Sequence

import numpy as np

from ..model import measures
from ..model.errors import ModelError
from ..trace.model import Model
from ..model.tokenize import Tokenizer
from ..trace.trace import Trace
from .word_match import Pick, find_word, piece_text, word_spellings  # noqa: F401  (public here too)

MIN_SENTENCES, MAX_SENTENCES = 2, 8
NEAREST_K = 3
PARTING_MARGIN = 0.05          # "separate" = cosine this far below where it started


# -- the sentences --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sentence:
    """One sentence of a comparison: its trace and the token compared in it."""
    number: int                      # 1-based, among the non-empty sentences
    text: str
    trace: Optional[Trace]
    position: Optional[int]
    note: str = ""
    problem: str = ""                # why nothing is computed for it (then position is None)

    @property
    def ok(self) -> bool:
        return self.trace is not None and self.position is not None

    def describe(self) -> str:
        shown = self.text if len(self.text) <= 40 else self.text[:39] + "…"
        return f"sentence {self.number} ('{shown}')"


def checked_texts(texts: Sequence[str]) -> list[str]:
    """The non-empty sentences, in order; ModelError if there are more than MAX_SENTENCES."""
    kept = [t for t in texts if isinstance(t, str) and t.strip()]
    if len(kept) > MAX_SENTENCES:
        raise ModelError(f"{len(kept)} sentences: compare takes at most {MAX_SENTENCES}")
    return kept


def pick(trace: Trace, tokenizer: Tokenizer, word: str, position: Optional[int] = None,
         spellings: Optional[Sequence[tuple[str, ...]]] = None) -> Pick:
    """The token to compare in `trace`: `position` if given, else the word's first occurrence."""
    if position is not None:
        if not 0 <= position < trace.n_seq:
            return Pick(None, problem=f"token {position} is outside its {trace.n_seq} tokens")
        return Pick(int(position))
    if not word.strip():
        return Pick(None, problem="no word to look for: type one, or click a token")
    if spellings is None:
        spellings = word_spellings(tokenizer, word.strip(), trace.config.n_ctx)
    return find_word(trace.tokens, trace.special_tokens_mask, trace.offsets, trace.text, spellings,
                     word.strip())


def sentences_of(model: Model, texts: Sequence[str], word: str,
                 positions: Optional[Mapping[int, int]] = None,
                 traces: Optional[Mapping[str, Trace]] = None) -> list[Sentence]:
    """Trace each non-empty text (reusing `traces[text]` where given) and pick its token.
    `positions` maps a sentence's 0-based index among the non-empty ones to a token chosen by
    hand. A sentence that does not trace, or lacks the word, carries a problem instead."""
    texts = checked_texts(texts)
    positions = positions or {}
    traces = traces or {}
    spellings: Optional[list] = None
    spelling_problem = ""
    if word.strip() and len(positions) < len(texts):
        try:
            spellings = word_spellings(model.tokenizer, word.strip(), model.config.n_ctx)
        except ModelError as exc:
            spelling_problem = str(exc)
    sentences = []
    for index, text in enumerate(texts):
        number = index + 1
        trace = traces.get(text)
        if trace is None:
            try:
                trace = model.trace(text)
            except ModelError as exc:
                sentences.append(Sentence(number, text, None, None, problem=str(exc)))
                continue
        chosen = positions.get(index)
        if chosen is None and spelling_problem:
            sentences.append(Sentence(number, text, trace, None, problem=spelling_problem))
            continue
        found = pick(trace, model.tokenizer, word, chosen, spellings or [])
        sentences.append(Sentence(number, text, trace, found.position, found.note, found.problem))
    return sentences


# -- the comparison ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Occurrence:
    sentence: int            # index into Comparison.sentences
    number: int              # the sentence's 1-based number
    position: int            # token index in its sentence
    piece: str               # the tokenizer's piece
    token_id: int

    @property
    def label(self) -> str:
        return f"S{self.number} {piece_text(self.piece)}"


@dataclass(frozen=True)
class Comparison:
    """Every number the Compare view shows. n_states = n_layer + 1 (hidden_states: the
    embedding output, then each layer's output); the pool is every ordinary (non-special) token
    of the sentences compared, in sentence order."""
    word: str
    sentences: tuple[Sentence, ...]
    occurrences: tuple[Occurrence, ...]
    state_names: tuple[str, ...]            # "embedding", "layer 0", ...
    pairs: tuple[tuple[int, int], ...]      # occurrence indices (i < j)
    pair_cosines: np.ndarray                # [n_pairs, n_states]
    self_cosines: np.ndarray                # [n_occ, n_states] cosine to its own state 0
    hidden: np.ndarray                      # [n_occ, n_states, d_model]
    lookup_rows: np.ndarray                 # [n_occ, d_model] rows of E (token_embeddings)
    entry: Mapping[str, np.ndarray]         # what enters layer 0, [n_occ, ...] per name
    pool_sentence: np.ndarray               # [n_pool] index into sentences
    pool_position: np.ndarray               # [n_pool] token index in its sentence
    pool_pieces: tuple[str, ...]            # [n_pool]
    occurrence_pool: np.ndarray             # [n_occ] each occurrence's index in the pool
    map_coords: np.ndarray                  # [n_states, n_pool, 2] PCA per state
    map_explained: np.ndarray               # [n_states, 2] fraction of variance per axis
    nearest: np.ndarray                     # [n_occ, n_states, k] pool index, -1 = none
    nearest_cosines: np.ndarray             # [n_occ, n_states, k]
    notes: tuple[str, ...] = field(default=())      # "sentence 2 (...): ..." per note
    problems: tuple[str, ...] = field(default=())   # "sentence 3 (...): no 'bank' in it"

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    def pair_label(self, p: int) -> str:
        i, j = self.pairs[p]
        return f"S{self.occurrences[i].number}–S{self.occurrences[j].number}"

    def same_id(self, i: int, j: int) -> bool:
        return self.occurrences[i].token_id == self.occurrences[j].token_id

    def lookup_difference(self, i: int, j: int) -> np.ndarray:
        # [d_model]: E[id_i] - E[id_j], exactly 0 when the ids are equal (the same row)
        return self.lookup_rows[i] - self.lookup_rows[j]

    def table(self) -> tuple[list[str], np.ndarray]:
        """compare.csv's columns and values [n_states, n_pairs + n_occ]: the cosine of every
        pair per hidden-state index, then each occurrence's cosine to its own state 0."""
        columns = [f"cos_S{self.occurrences[i].number}_S{self.occurrences[j].number}"
                   for i, j in self.pairs]
        columns += [f"cos_S{o.number}_to_own_state0" for o in self.occurrences]
        values = np.concatenate([self.pair_cosines.T, self.self_cosines.T], axis=1)
        return columns, values


def state_names(n_layer: int) -> tuple[str, ...]:
    return ("embedding",) + tuple(f"layer {i}" for i in range(n_layer))


def entry_arrays(sentences: Sequence[Sentence], occurrences: Sequence[Occurrence]) -> dict[str, np.ndarray]:
    """What enters layer 0 for each occurrence: e (the lookup row), p, t where the model adds
    them, the embedding output, and for rotary models the angles its q and k turn by."""
    out: dict[str, list[np.ndarray]] = {}
    for occ in occurrences:
        trace = sentences[occ.sentence].trace
        for name in ("token_embeddings", "token_embeddings_scaled", "position_embeddings",
                     "token_type_embeddings", "embedding_output", "rope_angles"):
            if name in trace.arrays:
                out.setdefault(name, []).append(np.asarray(trace.arrays[name][occ.position]))
    return {name: np.stack(rows) for name, rows in out.items()}


def _pool(sentences: Sequence[Sentence], occurrences: Sequence[Occurrence], n_states: int,
          d_model: int):
    """Every ordinary token of the sentences that have an occurrence (a special token picked
    by hand counts too). -> (sentence [n_pool], position [n_pool], pieces, each occurrence's
    index in the pool [n_occ], hidden states [n_states, n_pool, d_model])."""
    pool_sentence, pool_position, pieces, states = [], [], [], []
    occurrence_pool = np.zeros(len(occurrences), dtype=np.int64)
    for o, occ in enumerate(occurrences):
        trace = sentences[occ.sentence].trace
        ordinary = np.flatnonzero(~trace.special_tokens_mask)
        if occ.position not in ordinary:
            ordinary = np.sort(np.append(ordinary, occ.position))
        occurrence_pool[o] = len(pool_sentence) + int(np.searchsorted(ordinary, occ.position))
        pool_sentence.extend([occ.sentence] * len(ordinary))
        pool_position.extend(int(i) for i in ordinary)
        pieces.extend(trace.tokens[i] for i in ordinary)
        states.append(trace.hidden_states[:, ordinary])              # [n_states, n_i, d]
    pool = np.concatenate(states, axis=1) if states else np.zeros((n_states, 0, d_model))
    return (np.asarray(pool_sentence, dtype=np.int64), np.asarray(pool_position, dtype=np.int64),
            tuple(pieces), occurrence_pool, pool)


def pca_maps(pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # [n_states, n_pool, d] -> coords [n_states, n_pool, 2], explained [n_states, 2]: PCA fitted
    # per state, each state's axes signed to agree with the previous state's
    n_states, n_pool = pool.shape[:2]
    coords = np.zeros((n_states, n_pool, 2))
    explained = np.zeros((n_states, 2))
    if n_pool == 0:
        return coords, explained
    for s in range(n_states):
        # fitted on the rows that are numbers (corrupt weights give NaN/Inf states): those
        # rows get NaN coordinates, drawn as nothing, and the rest are mapped as usual
        finite = np.isfinite(pool[s]).all(axis=-1)
        coords[s][~finite] = np.nan
        if not finite.any():
            continue
        mean, axes, explained[s] = measures.principal_axes(pool[s][finite], 2)
        coords[s][finite] = measures.project(pool[s][finite], mean, axes)
        if s > 0:
            both = finite & np.isfinite(coords[s - 1]).all(axis=-1)
            coords[s] *= measures.align_signs(coords[s][both], coords[s - 1][both])
    return coords, explained


def _nearest(pool: np.ndarray, pool_ids: np.ndarray, hidden: np.ndarray,
             occurrences: Sequence[Occurrence], occurrence_pool: np.ndarray, k: int):
    """Each occurrence's k nearest pool tokens per state, leaving out the token itself and
    every other token with its id (the other occurrences of the word, whose cosines the cosine
    plot has): the neighbours are context. -> (indices, cosines) [n_occ, n_states, k]."""
    n_occ, n_states = hidden.shape[:2]
    nearest = np.full((n_occ, n_states, k), -1, dtype=np.int64)
    cosines = np.full((n_occ, n_states, k), np.nan)
    if n_occ == 0 or pool.shape[1] == 0:
        return nearest, cosines
    same = pool_ids[None, :] == np.array([o.token_id for o in occurrences])[:, None]
    same[np.arange(n_occ), occurrence_pool] = True
    for s in range(n_states):
        nearest[:, s], cosines[:, s] = measures.nearest_in_pool(pool[s], hidden[:, s], k,
                                                                excluded=same)
    return nearest, cosines


def combine(sentences: Sequence[Sentence], word: str, k: int = NEAREST_K) -> Comparison:
    """The comparison of the sentences' picked tokens (sentences with a problem are left out)."""
    sentences = tuple(sentences)
    occurrences = tuple(
        Occurrence(index, s.number, s.position, s.trace.tokens[s.position],
                   int(s.trace.input_ids[s.position]))
        for index, s in enumerate(sentences) if s.ok)
    config = next((s.trace.config for s in sentences if s.trace is not None), None)
    n_states = config.n_layer + 1 if config is not None else 0
    d_model = config.d_model if config is not None else 0
    names = state_names(config.n_layer) if config is not None else ()
    n_occ = len(occurrences)
    hidden = np.zeros((n_occ, n_states, d_model), dtype=np.float32)
    for o, occ in enumerate(occurrences):
        hidden[o] = sentences[occ.sentence].trace.hidden_states[:, occ.position]
    wide = hidden.astype(np.float64)
    pairs = tuple(combinations(range(n_occ), 2))
    pair_cosines = np.array([measures.cosine_rows(wide[i], wide[j]) for i, j in pairs],
                            dtype=np.float64).reshape(len(pairs), n_states)
    self_cosines = np.array([measures.cosine_rows(wide[o], np.repeat(wide[o, :1], n_states, 0))
                             for o in range(n_occ)], dtype=np.float64).reshape(n_occ, n_states)
    entry = entry_arrays(sentences, occurrences) if n_occ else {}
    lookup = entry.get("token_embeddings", np.zeros((0, d_model), dtype=np.float32))

    pool_sentence, pool_position, pieces, occurrence_pool, pool = _pool(sentences, occurrences,
                                                                        n_states, d_model)
    map_coords, map_explained = pca_maps(pool)
    pool_ids = np.array([int(sentences[s].trace.input_ids[p])
                         for s, p in zip(pool_sentence, pool_position)], dtype=np.int64)
    nearest, nearest_cosines = _nearest(pool, pool_ids, hidden, occurrences, occurrence_pool, k)

    notes = _grouped([(s, s.note) for s in sentences if s.note])
    problems = _grouped([(s, s.problem) for s in sentences if s.problem])
    return Comparison(word=word, sentences=sentences, occurrences=occurrences, state_names=names,
                      pairs=pairs, pair_cosines=pair_cosines, self_cosines=self_cosines,
                      hidden=hidden, lookup_rows=lookup, entry=entry,
                      pool_sentence=pool_sentence, pool_position=pool_position,
                      pool_pieces=pieces, occurrence_pool=occurrence_pool,
                      map_coords=map_coords, map_explained=map_explained, nearest=nearest,
                      nearest_cosines=nearest_cosines, notes=notes, problems=problems)


def _grouped(messages: Sequence[tuple[Sentence, str]]) -> tuple[str, ...]:
    # one line per message, naming every sentence it applies to ("sentences 1, 3: ...")
    by_text: dict[str, list[Sentence]] = {}
    for sentence, text in messages:
        by_text.setdefault(text, []).append(sentence)
    lines = []
    for text, group in by_text.items():
        where = (group[0].describe() if len(group) == 1 else
                 "sentences " + ", ".join(str(s.number) for s in group))
        lines.append(f"{where}: {text}")
    return tuple(lines)


def attention_rows(comparison: Comparison, layer: int) -> list[np.ndarray]:
    """Each occurrence's attention weights at `layer`: [n_head, n_seq of its sentence], the
    row of its own token (which words it read). Computes that layer's detail per sentence."""
    rows = []
    for occ in comparison.occurrences:
        trace = comparison.sentences[occ.sentence].trace
        rows.append(np.array(trace.head_rows("attn_weights", layer, occ.position)))
    return rows


def compare(model: Model, texts: Sequence[str], word: str = "",
            positions: Optional[Sequence[Optional[int]]] = None, k: int = NEAREST_K) -> Comparison:
    """The same word in 2–8 sentences (empty ones ignored). `positions`, one per non-empty
    text, compares a given token instead (None: the word's first occurrence). A sentence
    without the word is left out and named in `problems`; ModelError if fewer than two
    sentences remain to compare, or more than eight were given."""
    if not isinstance(model, Model):
        raise TypeError("compare() takes a Model: compare(load_model(PATH), texts, word)")
    kept = checked_texts(texts)
    if len(kept) < MIN_SENTENCES:
        raise ModelError(f"{len(kept)} sentence(s): compare needs at least {MIN_SENTENCES}")
    chosen = {i: p for i, p in enumerate(positions or []) if p is not None}
    if not word.strip() and len(chosen) < len(kept):
        raise ModelError("no word to compare: give a word, or a position for every sentence")
    result = combine(sentences_of(model, kept, word, chosen), word, k)
    if len(result.occurrences) < MIN_SENTENCES:
        found = len(result.occurrences)
        raise ModelError(f"'{word}' is in {found} of the {len(kept)} sentences, "
                         f"nothing to compare ({'; '.join(result.problems)})")
    return result
