"""Held-out measures: next-token accuracy against a unigram baseline, and how well the
model predicts the words each corpus phenomenon hinges on."""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Iterator, Sequence

import numpy as np

from ..model.config import ModelConfig
from . import network
from .corpus import CORRELATIVES, Passage
from .loop import pad_batch


def predict(params, config: ModelConfig, sequences: Sequence[np.ndarray], batch_size: int = 64,
            pad_id: int = 0) -> list[np.ndarray]:
    """-> per sequence, next-token log-probabilities [len - 1, n_vocab]."""
    out = []
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start:start + batch_size]
        inputs, _, _ = pad_batch(chunk, pad_id)
        logits, _ = network.forward_batch(params, config, inputs)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        out.extend(log_probs[row, :len(seq) - 1] for row, seq in enumerate(chunk))
    return out


def unigram_prediction(train_sequences: Sequence[np.ndarray]) -> int:
    """The most frequent target token in training: the best guess that ignores context."""
    counts = Counter()
    for seq in train_sequences:
        counts.update(seq[1:].tolist())
    return counts.most_common(1)[0][0]


def _context_key(passage: Passage, note) -> str:
    """What fixes the set of right next words: the antecedent noun, or the word's sense."""
    return passage.words[note.source] if note.kind == "pronoun" else note.label


def allowed_next_words(passages: Sequence[Passage]) -> dict[tuple[str, str], set[str]]:
    """(kind, context) -> every word that follows a pronoun with that antecedent, or an
    ambiguous word in that sense, in `passages` (the grammar leaves a choice there, so a
    prediction is right when it is one of them)."""
    allowed: dict[tuple[str, str], set[str]] = {}
    for passage in passages:
        for note in passage.annotations:
            if note.kind in ("pronoun", "ambiguous"):
                key = (note.kind, _context_key(passage, note))
                allowed.setdefault(key, set()).add(passage.words[note.position + 1])
    return allowed


# Where the grammar fixes one right word among rivals, the model should rank it above them.
RIVALS = {"agreement": ("was", "were"), "closing": tuple(close for _, close in CORRELATIVES)}


def phenomenon_hit(log_probs: np.ndarray, passage: Passage, note, allowed: dict, tokenizer) -> bool:
    """Did the model get `note`'s word right? log_probs [n_seq - 1, n_vocab] of the passage.

    pronoun / ambiguous: the top prediction after the word is one the grammar allows there
    (a habit of the antecedent, a continuation of that sense); agreement / closing: the right
    was/were, or/nor/and is ranked above its rivals. Token index = word index + 1 ([BOS])."""
    if note.kind in ("pronoun", "ambiguous"):
        predicted = tokenizer.id_to_token(int(np.argmax(log_probs[note.position + 1])))
        return predicted in allowed.get((note.kind, _context_key(passage, note)), ())
    row = log_probs[note.position]           # predicted at the token before the word
    right = row[tokenizer.token_to_id(note.label)]
    return all(right > row[tokenizer.token_to_id(w)] for w in RIVALS[note.kind] if w != note.label)


def evaluate(params, config: ModelConfig, sequences: Sequence[np.ndarray], passages: Sequence[Passage],
             unigram_id: int, allowed: dict, tokenizer) -> dict:
    """Held-out next-token accuracy and loss, the unigram baseline, and per-phenomenon accuracy
    (see phenomenon_hit)."""
    correct = total = unigram_correct = 0
    loss_sum = 0.0
    by_kind: dict[str, list[int]] = {}
    for seq, passage, log_probs in zip(sequences, passages, predict(params, config, sequences)):
        targets = seq[1:]
        correct += int(np.sum(log_probs.argmax(axis=-1) == targets))
        unigram_correct += int(np.sum(targets == unigram_id))
        total += len(targets)
        loss_sum -= float(np.take_along_axis(log_probs, targets[:, None], axis=-1).sum())
        for note in passage.annotations:
            hit = phenomenon_hit(log_probs, passage, note, allowed, tokenizer)
            by_kind.setdefault(note.kind, []).append(int(hit))
    return {
        "heldout_tokens": total,
        "heldout_accuracy": correct / total,
        "heldout_loss": loss_sum / total,
        "unigram_accuracy": unigram_correct / total,
        "phenomena_accuracy": {kind: float(np.mean(hits)) for kind, hits in sorted(by_kind.items())},
    }


# ------------------------------------------------------------------------------ heads
HEAD_JOBS = {
    "pronoun": "from a pronoun to its antecedent noun",
    "agreement": "from the word before was/were to the subject it agrees with",
    "closing": "from the word before or/nor/and to the opening either/neither/both",
}


def attention_query_key(note) -> tuple[int, int]:
    """(query token, key token) a head doing `note`'s job attends between. Token = word + 1
    ([BOS]). For agreement and closing the word is predicted at the token before it."""
    if note.kind == "pronoun":
        return note.position + 1, note.source + 1
    return note.position, note.source + 1


def attention_maps(params, config: ModelConfig, sequences: Sequence[np.ndarray], batch_size: int = 64,
                   pad_id: int = 0) -> Iterator[np.ndarray]:
    """Per sequence, [n_layer, n_head, n_seq, n_seq] attention weights (as trace.attentions);
    copies, so the padded batch behind them is freed."""
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start:start + batch_size]
        inputs, _, _ = pad_batch(chunk, pad_id)
        _, (_, block_caches, _, _) = network.forward_batch(params, config, inputs)
        weights = np.stack([cache[2][4] for cache in block_caches], axis=1)  # [batch, L, H, n, n]
        for row, seq in enumerate(chunk):
            n = len(seq) - 1
            yield weights[row, :, :, :n, :n].copy()


def _count_hits(attentions: Iterable[np.ndarray], passages: Sequence[Passage], kinds) -> dict:
    """kind -> [hits [n_layer, n_head], cases]: how often each head's largest weight from the
    job's query lands on its key. Positions beyond an array (truncated text) are skipped."""
    counts: dict = {}
    for weights, passage in zip(attentions, passages):
        for note in passage.annotations:
            if note.kind not in kinds:
                continue
            query, key = attention_query_key(note)
            if query >= weights.shape[-1]:
                continue
            found = (weights[:, :, query, :].argmax(axis=-1) == key).astype(np.int64)
            entry = counts.setdefault(note.kind, [np.zeros_like(found), 0])
            entry[0] += found
            entry[1] += 1
    return counts


def head_scores(attentions: Iterable[np.ndarray], passages: Sequence[Passage], kind: str):
    """-> ([n_layer, n_head] fraction of `kind` cases in which the head's largest weight from
    the query lands on the key, number of cases); (None, 0) without cases. `attentions` as
    trace.attentions, one per passage."""
    counts = _count_hits(attentions, passages, (kind,))
    if kind not in counts:
        return None, 0
    hits, cases = counts[kind]
    return hits / cases, cases


def best_heads(attentions: Iterable[np.ndarray], passages: Sequence[Passage]) -> dict:
    """For each job in HEAD_JOBS, the head that does it most often, and how often."""
    found = {}
    for kind, (hits, cases) in sorted(_count_hits(attentions, passages, HEAD_JOBS).items()):
        scores = hits / cases
        layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
        found[kind] = {"layer": int(layer), "head": int(head), "score": float(scores[layer, head]),
                       "cases": cases, "job": HEAD_JOBS[kind]}
    return found


# ------------------------------------------------------------------------------ losses
def heldout_loss(params, config: ModelConfig, sequences: Sequence[np.ndarray], batch_size: int = 64,
                 pad_id: int = 0) -> float:
    """Mean next-token cross-entropy (nats per token) over `sequences`, by the training
    forward pass (the loss the training curve shows, on passages it never trained on)."""
    from .layers import cross_entropy

    loss_sum = total = 0.0
    for start in range(0, len(sequences), batch_size):
        inputs, targets, weights = pad_batch(sequences[start:start + batch_size], pad_id)
        logits, _ = network.forward_batch(params, config, inputs)
        loss, _ = cross_entropy(logits, targets, weights)
        loss_sum += loss * float(weights.sum())
        total += float(weights.sum())
    return loss_sum / max(total, 1.0)


def unigram_loss(train_sequences: Sequence[np.ndarray], heldout_sequences: Sequence[np.ndarray],
                 n_vocab: int) -> float:
    """The held-out loss of a model that ignores context and predicts every token by its
    frequency in training (add-one smoothed): the line a model must get below to use context."""
    counts = np.ones(n_vocab)
    for seq in train_sequences:
        counts += np.bincount(seq[1:], minlength=n_vocab)
    log_probs = np.log(counts / counts.sum())
    targets = np.concatenate([seq[1:] for seq in heldout_sequences])
    return float(-log_probs[targets].mean())
