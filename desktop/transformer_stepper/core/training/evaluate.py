"""Held-out measures: next-token accuracy against a unigram baseline, and how well the
model predicts the words each corpus phenomenon hinges on."""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from ..config import ModelConfig
from . import network
from .corpus import Passage
from .loop import pad_batch


def predict(params, config: ModelConfig, sequences: Sequence[np.ndarray], batch_size: int = 64,
            pad_id: int = 0):
    """-> list of (argmax predictions [len - 1], per-position losses [len - 1]) per sequence."""
    out = []
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start:start + batch_size]
        inputs, targets, weights = pad_batch(chunk, pad_id)
        logits, _ = network.forward_batch(params, config, inputs)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        losses = -np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
        predictions = logits.argmax(axis=-1)
        for row, seq in enumerate(chunk):
            n = len(seq) - 1
            out.append((predictions[row, :n], losses[row, :n]))
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


def evaluate(params, config: ModelConfig, sequences: Sequence[np.ndarray], passages: Sequence[Passage],
             unigram_id: int, allowed: dict, tokenizer) -> dict:
    """Held-out next-token accuracy and loss, the unigram baseline, and per-phenomenon accuracy.

    Phenomena: the word after a pronoun is one of its antecedent's habits; the word after an
    ambiguous word is one that follows it in that sense; the was/were of an agreement and the
    closing word of either/neither/both are the right ones. (Token index = word index + 1.)"""
    results = predict(params, config, sequences)
    correct = total = 0
    loss_sum = 0.0
    unigram_correct = 0
    by_kind: dict[str, list[int]] = {}
    for seq, passage, (predictions, losses) in zip(sequences, passages, results):
        targets = seq[1:]
        correct += int(np.sum(predictions == targets))
        unigram_correct += int(np.sum(targets == unigram_id))
        total += len(targets)
        loss_sum += float(losses.sum())
        for note in passage.annotations:
            # the prediction made at token t is for token t + 1
            if note.kind in ("pronoun", "ambiguous"):
                predicted = tokenizer.id_to_token(int(predictions[note.position + 1]))
                hit = predicted in allowed.get((note.kind, _context_key(passage, note)), ())
            else:
                hit = predictions[note.position] == targets[note.position]
            by_kind.setdefault(note.kind, []).append(int(hit))
    return {
        "heldout_tokens": total,
        "heldout_accuracy": correct / total,
        "heldout_loss": loss_sum / total,
        "unigram_accuracy": unigram_correct / total,
        "phenomena_accuracy": {kind: float(np.mean(hits)) for kind, hits in sorted(by_kind.items())},
    }
