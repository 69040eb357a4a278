"""Training speed of the built-in model's recipe: throughput (tokens/s, forward + backward +
Adam) with one BLAS thread (what training uses) and with numpy's default thread count, and
the wall time until the running training loss (mean of the last 100 steps) first reaches the
shipped model's final training loss (resources/model/recipe.json).

    python tests/bench/bench_train.py                  # throughput, then the full recipe
    python tests/bench/bench_train.py --throughput     # throughput only (about a minute)

Figures depend on what else runs on the machine: note the load average printed first."""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from transformer_stepper.core.training import loop, network
from transformer_stepper.core.model.blas import blas_threads
from transformer_stepper.core.training.recipe import Recipe, build_dataset, train_builtin
from transformer_stepper.io.resources import builtin_model_dir


def throughput(recipe: Recipe, dataset, threads, steps: int = 60) -> float:
    config = recipe.model_config(dataset.tokenizer.get_vocab_size())
    params = network.init_params(config, np.random.default_rng(0))
    data = loop.batches(dataset.train_sequences, recipe.batch_size, np.random.default_rng(0), 0)
    batches = [next(data) for _ in range(steps)]
    with blas_threads(threads):
        network.loss_and_grads(params, config, *batches[0])   # warm-up
        started = time.perf_counter()
        tokens = 0
        for inputs, targets, weights in batches:
            network.loss_and_grads(params, config, inputs, targets, weights)
            tokens += int(weights.sum())
        return tokens / (time.perf_counter() - started)


def time_to_shipped_loss(recipe: Recipe, dataset) -> None:
    shipped = json.loads((builtin_model_dir() / "recipe.json").read_text())["result"]
    target = shipped["final_train_loss"]
    recent: list[float] = []
    reached: dict = {}

    def watch(progress) -> None:
        recent.append(progress.loss)
        del recent[:-100]
        if "step" not in reached and len(recent) == 100 and np.mean(recent) <= target:
            reached.update(step=progress.step, seconds=progress.seconds)
        if progress.step % 500 == 0:
            print(f"  step {progress.step}/{progress.steps}  running loss {np.mean(recent):.4f}  "
                  f"{progress.tokens_per_second:,.0f} tokens/s", flush=True)

    started = time.perf_counter()
    trained = train_builtin(recipe, watch, dataset=dataset)
    total = time.perf_counter() - started
    print(f"shipped final training loss          {target:.4f}")
    if reached:
        print(f"time to reach it                     {reached['seconds']:.0f} s (step {reached['step']})")
    else:
        print(f"not reached in {recipe.steps} steps (final running loss "
              f"{trained.result['final_train_loss']:.4f})")
    print(f"full recipe: training                {trained.result['train_seconds']:.0f} s, "
          f"{trained.result['tokens_per_second']:,} tokens/s")
    print(f"full recipe: with corpus and eval    {total:.0f} s")
    print(f"held-out accuracy                    {trained.result['heldout_accuracy']:.3f} "
          f"(shipped {shipped['heldout_accuracy']:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughput", action="store_true", help="skip the full training run")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    recipe = Recipe()
    started = time.perf_counter()
    dataset = build_dataset(recipe)
    print(f"corpus: {len(dataset.train_passages)} passages, "
          f"{sum(len(s) - 1 for s in dataset.train_sequences):,} tokens, built in "
          f"{time.perf_counter() - started:.1f} s (vocabulary {dataset.tokenizer.get_vocab_size()})")
    for threads, label in ((1, "1 BLAS thread"), (None, "default BLAS threads")):
        print(f"throughput, {label:<22}{throughput(recipe, dataset, threads):>10,.0f} tokens/s")
    if not args.throughput:
        time_to_shipped_loss(recipe, dataset)


if __name__ == "__main__":
    main()
