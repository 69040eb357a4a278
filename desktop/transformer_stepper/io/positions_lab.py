"""The positions laboratory's files: each variant as a model folder the loader opens (like the
built-in model's: config.json, model.safetensors, tokenizer.json, recipe.json with what it
measured, curve.csv with its training and held-out loss), and the results table as CSV."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..core.model.errors import ModelError
from ..core.training.recipe import TrainedModel
from .array_export import write_bytes
from .model_folder import save_model_folder

DESCRIPTIONS = {
    "sum_sinusoidal": "fixed sinusoids added to the token embeddings (the shipped model's scheme)",
    "sum_learned": "a learned position table added to the token embeddings (GPT-2, BERT)",
    "concat": "[e | p]: token part and sinusoid position part side by side, same d_model",
    "rotary": "no position vector; q and k rotated per head (Llama)",
    "none": "no position information; only the causal mask leaks order",
}
CURVE_FILE = "curve.csv"
CURVE_COLUMNS = ("step", "train_loss", "heldout_loss")
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
    write_curve_csv(folder / CURVE_FILE, trained.result["curve"])


def write_curve_csv(path: Path, curve: dict) -> None:
    """One row per step that has a training-loss window mean or a held-out loss (the other
    cell empty): step, train_loss, heldout_loss."""
    train = dict(zip(curve["step"], curve["loss"]))
    heldout = dict(zip(curve.get("heldout_step", []), curve.get("heldout_loss", [])))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CURVE_COLUMNS)
        for step in sorted(set(train) | set(heldout)):
            writer.writerow([step, train.get(step, ""), heldout.get(step, "")])


def read_curve_csv(path: Path) -> dict[str, np.ndarray]:
    """curve.csv -> {"step", "train_loss", "heldout_loss"}: float arrays, NaN where empty."""
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows or tuple(rows[0]) != CURVE_COLUMNS:
        raise ModelError(f"{path}: expected the columns {', '.join(CURVE_COLUMNS)}")
    try:
        values = np.array([[float(cell) if cell else np.nan for cell in row] for row in rows[1:]],
                          dtype=np.float64).reshape(-1, len(CURVE_COLUMNS))
    except ValueError as error:
        raise ModelError(f"{path}: {error}") from None
    return {name: values[:, i] for i, name in enumerate(CURVE_COLUMNS)}


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


def read_results_csv(path: Path) -> list[dict]:
    """results.csv -> one dict per row: "variant" a string, "seed" and "steps" ints, every other
    column a float or None (empty cell). ModelError names the file and the bad cell."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in ("variant", "seed") if c not in (reader.fieldnames or ())]
            if missing:
                raise ModelError(f"{path}: no column {missing[0]!r}")
            rows = []
            for number, raw in enumerate(reader, start=2):
                row: dict = {}
                for key, cell in raw.items():
                    try:
                        row[key] = (cell if key == "variant" else int(cell) if key in ("seed", "steps")
                                    else float(cell) if cell not in ("", None) else None)
                    except ValueError:
                        raise ModelError(f"{path}, line {number}: {key} = {cell!r} is not a number") from None
                rows.append(row)
    except OSError as error:
        raise ModelError(f"{path}: {error.strerror or error}") from None
    return rows


RESULTS_FILE = "results.csv"


@dataclass
class LabVariant:
    """One variant's model folder in a positions-lab folder (its first seed's): what its
    recipe.json measured, and its curve."""
    name: str
    folder: Path
    seed: int
    recipe: dict                           # recipe.json "recipe" (steps, d_model, corpus, ...)
    result: dict                           # recipe.json "result" (interference, probe, ...)
    curve: dict[str, np.ndarray]           # read_curve_csv, or recipe.json's curve if no csv


@dataclass
class LabFolder:
    """A positions-lab folder (resources/positions, or `positions-lab --out DIR`'s output)."""
    root: Path
    rows: list[dict]                       # results.csv
    variants: dict[str, LabVariant]        # in the order of results.csv


def variant_folder(root: Path, variant: str, seeds: Sequence[int]) -> Optional[Path]:
    """`<variant>` (shipped, or one seed) or `<variant>-seed<S>` for the first seed that has one."""
    root = Path(root)
    if (root / variant / "recipe.json").is_file():
        return root / variant
    for seed in seeds:
        if (root / f"{variant}-seed{seed}" / "recipe.json").is_file():
            return root / f"{variant}-seed{seed}"
    return None


def read_lab_folder(root: Path) -> LabFolder:
    """results.csv and each variant's folder; ModelError names what is missing or unreadable."""
    root = Path(root)
    rows = read_results_csv(root / RESULTS_FILE)
    if not rows:
        raise ModelError(f"{root / RESULTS_FILE}: no results")
    seeds = sorted({r["seed"] for r in rows})
    variants: dict[str, LabVariant] = {}
    for name in dict.fromkeys(r["variant"] for r in rows):
        folder = variant_folder(root, name, seeds)
        if folder is None:
            raise ModelError(f"{root}: no model folder for variant {name!r} ({name}/ or {name}-seed<S>/)")
        try:
            stored = json.loads((folder / "recipe.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ModelError(f"{folder / 'recipe.json'}: {error}") from None
        result = stored.get("result", {})
        if (folder / CURVE_FILE).is_file():
            curve = read_curve_csv(folder / CURVE_FILE)
        else:
            recorded = result.get("curve", {"step": [], "loss": []})
            curve = {"step": np.asarray(recorded["step"], dtype=np.float64),
                     "train_loss": np.asarray(recorded["loss"], dtype=np.float64),
                     "heldout_loss": np.full(len(recorded["step"]), np.nan)}
        recipe = stored.get("recipe", {})
        variants[name] = LabVariant(name, folder, int(recipe.get("seed", seeds[0])), recipe, result, curve)
    return LabFolder(root, rows, variants)


SUMMARY_FILE = "positions-table.csv"
SUMMARY_COLUMNS = ("variant", "measure", "mean", "min", "max", "seeds", "standing")


def write_summary_csv(path: Path, rows: Sequence[dict]) -> bool:
    """The Positions table in long format (SUMMARY_COLUMNS), written atomically.
    -> True if an existing file was replaced; ModelError names the file on failure."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=SUMMARY_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    return write_bytes(Path(path), text.getvalue().encode("utf-8"))
