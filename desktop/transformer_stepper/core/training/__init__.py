"""Training in numpy (no Qt, no files): the backward pass of core/model/forward.py's architecture,
Adam, a seeded loop with a progress callback, and the generated teaching corpus.

    from transformer_stepper.core.training import Recipe, train_builtin
    trained = train_builtin(Recipe(steps=200), callback=lambda p: print(p.step, p.loss))

Modules: layers (forward/backward per layer type), network (the model's batched forward and
backward), optim (AdamW, schedule), loop (the training loop), corpus (grammar, tokenizer),
evaluate (held-out measures), recipe (the built-in model's recipe), blas (thread pinning)."""
from .loop import TrainProgress, train
from .optim import AdamConfig
from .recipe import Recipe, TrainedModel, train_builtin

__all__ = ["AdamConfig", "Recipe", "TrainProgress", "TrainedModel", "train", "train_builtin"]
