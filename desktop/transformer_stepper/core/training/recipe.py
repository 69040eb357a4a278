"""The built-in model's recipe: corpus, architecture, optimiser, seed and steps, in one place.

`train_builtin(Recipe())` reproduces the shipped model; the recipe is saved beside it
(recipe.json) so anyone can see and re-run exactly what produced it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..config import ModelConfig
from ..errors import ModelError
from . import corpus
from ..blas import blas_threads
from .evaluate import (allowed_next_words, attention_maps, best_heads, evaluate,
                       unigram_prediction)
from .loop import ProgressCallback, train
from .optim import AdamConfig


@dataclass(frozen=True)
class Recipe:
    seed: int = 0
    steps: int = 3000
    batch_size: int = 32
    d_model: int = 64
    n_head: int = 4
    n_layer: int = 3
    d_ff: int = 256
    n_ctx: int = 128
    activation: str = "relu"          # as in "Attention Is All You Need"
    optimizer: AdamConfig = field(default_factory=AdamConfig)
    corpus: corpus.CorpusConfig = field(default_factory=corpus.CorpusConfig)
    n_heldout: int = 2000             # held-out passages (none of them in the training set)
    heldout_seed: int = 1_000_003
    blas_threads: int = 1             # see blas.py

    def model_config(self, n_vocab: int) -> ModelConfig:
        return ModelConfig(
            family="stepper", name="transformer-stepper built-in", n_vocab=n_vocab, n_ctx=self.n_ctx,
            d_model=self.d_model, n_head=self.n_head, n_layer=self.n_layer, d_ff=self.d_ff,
            position="sinusoidal", norm="pre", causal=True, activation=self.activation,
            final_norm=True, lm_head=True)

    def replace(self, **changes) -> "Recipe":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["optimizer"] = self.optimizer.to_dict()
        data["corpus"] = self.corpus.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Recipe":
        data = dict(data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ModelError(f"recipe: unknown field(s) {', '.join(unknown)}")
        if "optimizer" in data:
            data["optimizer"] = AdamConfig(**data["optimizer"])
        if "corpus" in data:
            data["corpus"] = corpus.CorpusConfig.from_dict(data["corpus"])
        return cls(**data)


@dataclass
class Dataset:
    tokenizer: object                       # tokenizers.Tokenizer
    train_passages: list
    train_sequences: list                   # int64 id arrays, [BOS] first
    heldout_passages: list
    heldout_sequences: list


def build_dataset(recipe: Recipe, with_heldout: bool = True) -> Dataset:
    tokenizer = corpus.build_tokenizer()
    train_passages = corpus.generate(recipe.corpus.n_passages, recipe.seed, recipe.corpus)
    heldout_passages: list = []
    if with_heldout:
        heldout_passages = heldout(recipe, {p.words for p in train_passages})
    return Dataset(tokenizer, train_passages, corpus.encode(tokenizer, train_passages),
                   heldout_passages, corpus.encode(tokenizer, heldout_passages) if heldout_passages else [])


def heldout(recipe: Recipe, seen: Optional[set] = None) -> list:
    """`n_heldout` passages from the held-out seed, skipping any that occur in training."""
    if seen is None:
        seen = {p.words for p in corpus.generate(recipe.corpus.n_passages, recipe.seed, recipe.corpus)}
    out = []
    for passage in corpus.iter_passages(10 * recipe.n_heldout, recipe.heldout_seed, recipe.corpus):
        if passage.words not in seen:
            out.append(passage)
            if len(out) == recipe.n_heldout:
                break
    return out


@dataclass
class TrainedModel:
    config: ModelConfig
    params: dict
    tokenizer: object                       # tokenizers.Tokenizer
    recipe: Recipe
    result: dict                            # losses, held-out accuracy, baseline, timing


def train_builtin(recipe: Recipe = Recipe(), callback: ProgressCallback = None,
                  dataset: Optional[Dataset] = None) -> TrainedModel:
    """Generate the corpus, train, evaluate on held-out passages."""
    if recipe.steps <= 0:
        raise ModelError(f"training: steps must be a positive number, got {recipe.steps}")
    dataset = dataset or build_dataset(recipe)
    config = recipe.model_config(dataset.tokenizer.get_vocab_size(with_added_tokens=True))
    pad_id = dataset.tokenizer.token_to_id(corpus.PAD)
    recent: list[float] = []
    last = {}

    def on_step(progress) -> None:
        recent.append(progress.loss)
        del recent[:-100]
        last["progress"] = progress
        if callback is not None:
            callback(progress)

    with blas_threads(recipe.blas_threads):
        params = train(config, dataset.train_sequences, steps=recipe.steps, seed=recipe.seed,
                       batch_size=recipe.batch_size, optimizer=recipe.optimizer, pad_id=pad_id,
                       callback=on_step, threads=recipe.blas_threads)
        result = {}
        if dataset.heldout_sequences:
            result = evaluate(params, config, dataset.heldout_sequences, dataset.heldout_passages,
                              unigram_prediction(dataset.train_sequences),
                              allowed_next_words(dataset.train_passages), dataset.tokenizer)
            maps = attention_maps(params, config, dataset.heldout_sequences, pad_id=pad_id)
            result["heads"] = best_heads(maps, dataset.heldout_passages)
    progress = last["progress"]
    result.update({
        "final_train_loss": float(np.mean(recent)),   # mean over the last 100 steps
        "train_tokens": progress.tokens,
        "train_seconds": round(progress.seconds, 1),
        "tokens_per_second": round(progress.tokens_per_second),
        "n_params": int(sum(p.size for p in params.values())),
    })
    return TrainedModel(config, params, dataset.tokenizer, recipe, result)
