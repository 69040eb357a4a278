"""The positions laboratory's files: each variant as a model folder the loader opens (like the
built-in model's: config.json, model.safetensors, tokenizer.json, recipe.json with what it
measured), and the results table as CSV."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from ..core.training.recipe import TrainedModel
from .model_folder import save_model_folder

DESCRIPTIONS = {
    "sum_sinusoidal": "fixed sinusoids added to the token embeddings (the shipped model's scheme)",
    "sum_learned": "a learned position table added to the token embeddings (GPT-2, BERT)",
    "concat": "[e | p]: token part and sinusoid position part side by side, same d_model",
    "rotary": "no position vector; q and k rotated per head (Llama)",
    "none": "no position information; only the causal mask leaks order",
}
COLUMNS = ("variant", "seed", "steps", "heldout_loss", "heldout_accuracy", "agreement", "ambiguous",
           "closing", "pronoun", "final_train_loss", "e_variance_in_p_subspace", "random_share",
           "mean_abs_cos", "probe_r2_last_layer", "train_seconds")


def save_variant_folder(folder: Path, trained: TrainedModel) -> None:
    """A model folder for one variant; `folder` must exist and be empty."""
    folder = Path(folder)
    save_model_folder(folder, trained)
    variant = trained.recipe.variant
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["description"] = (f"Positions laboratory, variant {variant}: {DESCRIPTIONS[variant]}. "
                             f"The built-in recipe otherwise (same corpus, seed, steps, optimiser).")
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    recipe = json.loads((folder / "recipe.json").read_text(encoding="utf-8"))
    recipe["command"] = ("transformer_stepper.core.training.positions_lab.train_variant("
                         f"{variant!r}, Recipe(steps={trained.recipe.steps}, seed={trained.recipe.seed}))")
    (folder / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")


def result_row(trained: TrainedModel) -> dict:
    r, recipe = trained.result, trained.recipe
    interference = r.get("interference") or {}
    row = {"variant": recipe.variant, "seed": recipe.seed, "steps": recipe.steps,
           "heldout_loss": r.get("heldout_loss"), "heldout_accuracy": r.get("heldout_accuracy"),
           "final_train_loss": r.get("final_train_loss"),
           "e_variance_in_p_subspace": interference.get("e_variance_in_p_subspace"),
           "random_share": interference.get("random_share"),
           "mean_abs_cos": interference.get("mean_abs_cos"),
           "probe_r2_last_layer": (r.get("position_probe_r2") or [None])[-1],
           "train_seconds": r.get("train_seconds")}
    row.update(r.get("phenomena_accuracy", {}))
    return row


def write_results_csv(path: Path, rows: Sequence[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (round(v, 5) if isinstance(v, (float, np.floating)) else v)
                             for k, v in row.items()})
