"""The built-in model's recipe: corpus, architecture, optimiser, seed and steps, in one place.

`train_builtin(Recipe())` reproduces the shipped model; the recipe is saved beside it
(recipe.json) so anyone can see and re-run exactly what produced it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..model.config import ModelConfig
from ..model.errors import ModelError
from . import corpus
from ..model.blas import blas_threads
from .evaluate import (allowed_next_words, attention_maps, best_heads, evaluate,
                       unigram_prediction)
from .control import TrainControl
from .evaluate import heldout_loss, unigram_loss
from .history import TrainingHistory
from .loop import ProgressCallback, init_rngs, train
from . import network
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
    name: str = "built-in"            # which recipe: "built-in", "quick" (RECIPES)

    def model_config(self, n_vocab: int) -> ModelConfig:
        return ModelConfig(
            family="stepper", name=f"transformer-stepper {self.name}", n_vocab=n_vocab, n_ctx=self.n_ctx,
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


# A smaller model on shorter passages with more pronoun episodes and a higher learning rate:
# about 45 s on one core, and it still learns the pronoun -> antecedent head (docs/guide.md, "Training").
QUICK = Recipe(
    name="quick", steps=1000, d_model=48, n_head=4, n_layer=2, d_ff=192,
    optimizer=AdamConfig(lr=4e-3, warmup_steps=50),
    corpus=corpus.CorpusConfig(n_passages=8000, max_episodes=2,
                               episode_weights=(("pronoun", 0.55), ("ambiguous", 0.225),
                                                ("agreement", 0.1125), ("closing", 0.1125))),
    n_heldout=400)

RECIPES = {"quick": QUICK, "builtin": Recipe()}


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


def initial_params(recipe: Recipe, config: ModelConfig) -> dict:
    """The parameters `train` starts from for this seed (the same draw it makes itself)."""
    init_rng, _ = init_rngs(recipe.seed)
    return network.init_params(config, init_rng)


@dataclass
class TrainedModel:
    config: ModelConfig
    params: dict
    tokenizer: object                       # tokenizers.Tokenizer
    recipe: Recipe
    result: dict                            # losses, held-out accuracy, baseline, timing


def new_history(recipe: Recipe, dataset: Dataset, max_snapshots: int = 64,
                heldout_every: Optional[int] = None) -> TrainingHistory:
    """A history for `recipe` on `dataset`: word classes from the grammar, the unigram baseline
    on the held-out passages, a held-out loss about 40 times over the run by default."""
    n_vocab = dataset.tokenizer.get_vocab_size(with_added_tokens=True)
    history = TrainingHistory(corpus.vocabulary_classes(dataset.tokenizer), recipe.steps,
                              max_snapshots=max_snapshots,
                              heldout_every=heldout_every or max(1, recipe.steps // 40))
    if dataset.heldout_sequences:
        history.unigram_loss = unigram_loss(dataset.train_sequences, dataset.heldout_sequences, n_vocab)
    return history


WATCHED_HELDOUT = 200        # held-out passages behind the live held-out loss


def train_builtin(recipe: Recipe = Recipe(), callback: ProgressCallback = None,
                  dataset: Optional[Dataset] = None, control: Optional[TrainControl] = None,
                  history: Optional[TrainingHistory] = None) -> TrainedModel:
    """Generate the corpus, train, evaluate on held-out passages. `control` pauses or stops
    between steps (TrainingStopped); `history` (new_history) records losses, a held-out loss at
    intervals, snapshots of E and of the model, before `callback` sees each step."""
    if recipe.steps <= 0:
        raise ModelError(f"training: steps must be a positive number, got {recipe.steps}")
    dataset = dataset or build_dataset(recipe)
    config = recipe.model_config(dataset.tokenizer.get_vocab_size(with_added_tokens=True))
    pad_id = dataset.tokenizer.token_to_id(corpus.PAD)
    recent: list[float] = []
    last = {}
    watched = dataset.heldout_sequences[:WATCHED_HELDOUT]
    init_params = None
    if history is not None:
        init_params = initial_params(recipe, config)
        history.start(init_params)
        if watched:
            history.add_heldout(0, 0, heldout_loss(init_params, config, watched, pad_id=pad_id))

    def on_step(progress) -> None:
        recent.append(progress.loss)
        del recent[:-100]
        last["progress"] = progress
        if history is not None:
            history.record(progress)
            if watched and history.wants_heldout(progress.step):
                history.add_heldout(progress.step, progress.tokens,
                                    heldout_loss(progress.detail.params, config, watched, pad_id=pad_id))
        if callback is not None:
            callback(progress)

    with blas_threads(recipe.blas_threads):
        params = train(config, dataset.train_sequences, steps=recipe.steps, seed=recipe.seed,
                       batch_size=recipe.batch_size, optimizer=recipe.optimizer, pad_id=pad_id,
                       callback=on_step, threads=recipe.blas_threads, params=init_params,
                       control=control, step_detail=history is not None)
        if control is not None:
            control.checkpoint()              # a stop during the last step: no evaluation
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
