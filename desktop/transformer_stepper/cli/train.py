"""`transformer-stepper train --out DIR [--recipe quick|builtin] [--steps N] [--seed S]
[--snapshots K]`: train the teaching model from a recipe and write it as a model folder the
loader opens, with its training history (history.npz: losses, E snapshots; see docs/cli.md, "Train").

The folder is written under a temporary name beside DIR and renamed at the very end
(io/model_folder.py), so an error or Ctrl-C never leaves a half-written model where a complete
one was expected."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from ..core.model.errors import ModelError
from ..core.training.loop import TrainProgress
from ..core.training.recipe import QUICK, Recipe, build_dataset, new_history, train_builtin
from ..io.model_folder import check_output, save_model_folder, staged_folder

DEFAULT_SNAPSHOTS = 64


def add_parser(sub) -> None:
    parser = sub.add_parser("train", help="train the built-in teaching model from scratch")
    parser.add_argument("--out", required=True, help="output model folder")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--recipe", choices=("builtin", "quick", "translator"), default="builtin",
                        help="builtin: the shipped model's recipe (default); quick: about 45 s; "
                             "translator: the built-in encoder–decoder (resources/translator/)")
    parser.add_argument("--snapshots", type=int, default=None,
                        help="E snapshots kept in history.npz, at most (default 64)")
    parser.set_defaults(run=run_train)


def _recipe_from_args(args) -> Recipe:
    recipe = QUICK if getattr(args, "recipe", None) == "quick" else Recipe()
    if args.steps is not None:
        if args.steps <= 0:
            raise ModelError(f"--steps must be a positive integer, got {args.steps}")
        recipe = recipe.replace(steps=int(args.steps))
    if args.seed is not None:
        if args.seed < 0:
            raise ModelError(f"--seed must be a non-negative integer, got {args.seed}")
        recipe = recipe.replace(seed=int(args.seed))
    return recipe


class _Printer:
    """Progress lines on stdout: about 20 over the run, and the last step."""

    def __init__(self, steps: int) -> None:
        self.every = max(1, steps // 20)

    def __call__(self, p: TrainProgress) -> None:
        if p.step == 1 or p.step % self.every == 0 or p.step == p.steps:
            print(f"step {p.step:>5}/{p.steps}  loss {p.loss:.4f}  lr {p.lr:.2e}  "
                  f"{p.tokens_per_second:,.0f} tokens/s  {p.seconds:,.0f} s", flush=True)


def run_train(args, on_progress: Optional[Callable[[TrainProgress], None]] = None) -> int:
    """args.out, args.steps, args.seed (None: the recipe's); optional args.force.
    `on_progress` also sees every step (the app's live view; tests use it to interrupt)."""
    if getattr(args, "recipe", None) == "translator":
        from .translator import run_translator
        return run_translator(args)
    recipe = _recipe_from_args(args)
    snapshots = getattr(args, "snapshots", None)
    snapshots = DEFAULT_SNAPSHOTS if snapshots is None else snapshots   # 0 is refused, not 64
    if snapshots < 2:
        raise ModelError(f"--snapshots must be at least 2, got {snapshots}")
    out = Path(args.out).expanduser().absolute()
    check_output(out, bool(getattr(args, "force", False)))
    printer = _Printer(recipe.steps)

    def callback(progress: TrainProgress) -> None:
        printer(progress)
        if on_progress is not None:
            on_progress(progress)

    print(f"training the {recipe.name} recipe: {recipe.n_layer} layers, {recipe.n_head} heads, "
          f"d_model {recipe.d_model}, {recipe.steps} steps, seed {recipe.seed}", flush=True)
    try:
        with staged_folder(out) as tmp:
            dataset = build_dataset(recipe)
            history = new_history(recipe, dataset, max_snapshots=snapshots)
            trained = train_builtin(recipe, callback, dataset=dataset, history=history)
            save_model_folder(tmp, trained, history)
    except KeyboardInterrupt:
        print(f"training stopped; nothing was written to {out}", flush=True)
        raise
    result = trained.result
    if "heldout_accuracy" in result:
        print(f"held-out next-token accuracy {result['heldout_accuracy']:.3f} "
              f"(unigram baseline {result['unigram_accuracy']:.3f}); "
              f"final training loss {result['final_train_loss']:.4f}")
    print(f"wrote {out}")
    return 0
