"""The built-in translator's recipe, training and measures: a small Marian-layout encoder–decoder
(post-LN, ReLU, sinusoidal positions, as in "Attention Is All You Need") trained on the generated
English -> Velan pairs (translation_corpus.py) by seq2seq_network.py with the decoder's Adam.

Measures: held-out exact match (greedy translation through the app's own Seq2SeqModel equals
the reference) and, per cross-attention head, the share of attention mass on the aligned source
word (alignment_share), under teacher forcing with the reference target."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from ..model.blas import blas_threads
from ..model.seq2seq import Seq2SeqConfig
from . import seq2seq_network, translation_corpus
from .loop import init_rngs
from .optim import Adam, AdamConfig, clip_gradients, learning_rate


@dataclass(frozen=True)
class TranslatorRecipe:
    seed: int = 0
    steps: int = 3000
    batch_size: int = 32
    d_model: int = 48
    n_head: int = 4
    n_layer: int = 2                  # on each side
    d_ff: int = 128
    n_ctx: int = 32
    n_train: int = 20000
    n_heldout: int = 500
    heldout_seed: int = 1_000_003
    optimizer: AdamConfig = field(default_factory=lambda: AdamConfig(lr=3e-3, warmup_steps=100))
    blas_threads: int = 1

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["optimizer"] = self.optimizer.to_dict()
        return data

    def replace(self, **changes) -> "TranslatorRecipe":
        return dataclasses.replace(self, **changes)

    def hf_config(self, n_vocab: int) -> dict:
        """config.json of the trained folder: a Marian checkpoint (io/families/marian.py)."""
        return {
            "model_type": "marian", "architectures": ["MarianMTModel"], "is_encoder_decoder": True,
            "d_model": self.d_model, "encoder_layers": self.n_layer, "decoder_layers": self.n_layer,
            "encoder_attention_heads": self.n_head, "decoder_attention_heads": self.n_head,
            "encoder_ffn_dim": self.d_ff, "decoder_ffn_dim": self.d_ff, "vocab_size": n_vocab,
            "decoder_vocab_size": n_vocab, "max_position_embeddings": self.n_ctx,
            "activation_function": "relu", "scale_embedding": False, "normalize_before": False,
            "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
            "eos_token_id": 0, "pad_token_id": 2, "decoder_start_token_id": 2,
            "name_or_path": "transformer-stepper built-in translator",
            "example_source": "the old man saw the red bank near the river .",
        }


def pad_pairs(encoded: Sequence[tuple[np.ndarray, np.ndarray]], pad: int, start: int):
    """(source ids, target ids ending in </s>) pairs -> source [b, S], valid [b, S], decoder
    inputs [b, T] (start + target without its last id), labels [b, T], weights [b, T]."""
    n_src = max(len(s) for s, _ in encoded)
    n_tgt = max(len(t) for _, t in encoded)
    b = len(encoded)
    source = np.full((b, n_src), pad, np.int64)
    decoder = np.full((b, n_tgt), pad, np.int64)
    labels = np.full((b, n_tgt), pad, np.int64)
    weights = np.zeros((b, n_tgt), np.float32)
    for row, (s, t) in enumerate(encoded):
        source[row, :len(s)] = s
        decoder[row, 0], decoder[row, 1:len(t)] = start, t[:-1]
        labels[row, :len(t)] = t
        weights[row, :len(t)] = 1.0
    return source, source != pad, decoder, labels, weights


def train_translator(recipe: TranslatorRecipe, config: Seq2SeqConfig, positions: np.ndarray,
                     encoded: Sequence[tuple[np.ndarray, np.ndarray]],
                     callback: Optional[Callable[[int, float], None]] = None) -> dict[str, np.ndarray]:
    """Seeded: the same recipe gives the same parameters (one process, one BLAS thread)."""
    init_rng, data_rng = init_rngs(recipe.seed)
    params = seq2seq_network.init_params(config, init_rng)
    adam = Adam(params, recipe.optimizer)
    order, at = data_rng.permutation(len(encoded)), 0
    with blas_threads(recipe.blas_threads):
        for step in range(1, recipe.steps + 1):
            if at + recipe.batch_size > len(order):
                order, at = data_rng.permutation(len(encoded)), 0
            batch = [encoded[i] for i in order[at:at + recipe.batch_size]]
            at += recipe.batch_size
            arrays = pad_pairs(batch, config.pad_token_id, config.decoder_start_token_id)
            loss, grads = seq2seq_network.loss_and_grads(params, config, positions, *arrays)
            clip_gradients(grads, recipe.optimizer.grad_clip)
            adam.step(params, grads, learning_rate(recipe.optimizer, step, recipe.steps))
            if not np.isfinite(loss):
                raise ValueError(f"translator training: the loss became {loss} at step {step}")
            if callback is not None:
                callback(step, loss)
    return params


# ------------------------------------------------------------------------------ measures
def alignment_share(cross_attentions: np.ndarray, align: Sequence[int]) -> np.ndarray:
    """[n_layer, n_head, n_tgt, n_src] cross-attention weights of a teacher-forced trace whose
    decoder input is [start, w_0, ..., w_{m-1}], and per target word w_j the index of its source
    word -> [n_layer, n_head]: the mean over j of the weight that the position predicting w_j
    (query j) puts on source word align[j]."""
    weights = np.asarray(cross_attentions)
    align = np.asarray(align, dtype=np.int64)
    if len(align) > weights.shape[2] or (len(align) and align.max() >= weights.shape[3]):
        raise ValueError(f"alignment: {len(align)} target words / source index {align.max()} "
                         f"do not fit cross-attentions of shape {weights.shape}")
    picked = weights[:, :, np.arange(len(align)), align]          # [n_layer, n_head, m]
    return picked.mean(axis=-1)


def evaluate(model, pairs: Sequence["translation_corpus.Pair"], n_tokens: int = 24) -> dict:
    """Greedy translation of every held-out pair through `model` (the app's Seq2SeqModel):
    exact match, and alignment_share averaged over the pairs (teacher-forced reference)."""
    from ..trace.seq2seq_generate import translate

    started = time.perf_counter()
    exact, shares = 0, []
    for pair in pairs:
        final = translate(model, pair.source_text, n_tokens)
        ids = [int(i) for i in final.decoder.input_ids[1:] if i != model.config.eos_token_id]
        produced = " ".join(model.target_tokenizer.id_to_token(i) for i in ids)
        exact += produced == pair.target_text
        forced = model.trace(pair.source_text, pair.target_text)
        shares.append(alignment_share(forced.cross_attentions, pair.align))
    share = np.mean(shares, axis=0)
    return {"heldout_pairs": len(pairs), "exact_match": exact / len(pairs),
            "alignment_share": share.round(4).tolist(),
            "best_head": [int(i) for i in np.unravel_index(np.argmax(share), share.shape)],
            "best_alignment_share": float(share.max()), "seconds": round(time.perf_counter() - started, 1)}
