"""The shipped positions-lab variants' curve.csv, and whether this machine reproduces them.

    PYTHONPATH=desktop python tests/bench/positions_curves.py [--retrain STEPS] [VARIANT ...]

Writes resources/positions/<variant>/curve.csv from the training-loss curve that recipe.json
recorded when the shipped weights were trained (window means of 10 steps; no held-out curve:
those runs did not record one). With --retrain N it also retrains each variant from its
recorded recipe for its first N steps (the recipe's full schedule, one BLAS thread) and prints
the first window whose mean differs from the recorded one: retraining on another CPU or BLAS
build drifts apart at float rounding, so a retrained curve would not be the shipped model's."""
import argparse
import json

from transformer_stepper.core.training import positions_lab as lab
from transformer_stepper.core.training.recipe import Recipe, build_dataset, train_builtin
from transformer_stepper.io.positions_lab import CURVE_FILE, write_curve_csv
from transformer_stepper.io.resources import resources_dir


class _Enough(Exception):
    pass


def first_difference(stored: dict, steps: int, dataset) -> str:
    base = Recipe.from_dict({k: v for k, v in stored["recipe"].items() if k not in ("variant", "d_position")})
    recipe = lab.variant_recipe(stored["recipe"]["variant"], base)
    losses: list[float] = []

    def on_step(progress) -> None:
        losses.append(progress.loss)
        if progress.step == steps:
            raise _Enough

    try:
        train_builtin(recipe, on_step, dataset)
    except _Enough:
        pass
    mine = lab.loss_curve(losses, points=len(losses) // 10)
    recorded = dict(zip(stored["result"]["curve"]["step"], stored["result"]["curve"]["loss"]))
    for step, loss in zip(mine["step"], mine["loss"]):
        if recorded.get(step) != loss:
            return f"first differs at the window ending at step {step}: {loss} vs recorded {recorded.get(step)}"
    return f"the first {steps} steps match the recorded curve"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--retrain", type=int, default=0)
    parser.add_argument("variants", nargs="*", default=list(lab.VARIANTS))
    args = parser.parse_args()
    root, dataset = resources_dir() / "positions", None
    for variant in args.variants:
        folder = root / variant
        stored = json.loads((folder / "recipe.json").read_text(encoding="utf-8"))
        write_curve_csv(folder / CURVE_FILE, stored["result"]["curve"])
        line = f"{variant}: wrote {folder / CURVE_FILE}"
        if args.retrain:
            if dataset is None:
                base = Recipe.from_dict({k: v for k, v in stored["recipe"].items()
                                         if k not in ("variant", "d_position")})
                dataset = build_dataset(base, with_heldout=False)
            line += "; retrained: " + first_difference(stored, args.retrain, dataset)
        print(line, flush=True)


if __name__ == "__main__":
    main()
