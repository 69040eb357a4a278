"""`transformer-stepper positions-lab`: retrain the positions laboratory's variants and write
each model folder, results.csv (one row per variant and seed) and results.json (with the
training curves), and, given a `figures` writer (the command line passes the Positions tab's,
rendered offscreen), the curves and interference figures. The output folder is checked before
anything is trained, written beside its final place and renamed at the end: an interruption
leaves nothing half-written."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Callable, Optional

from ..core.model.errors import ModelError
from ..core.training import positions_lab as lab
from ..core.training.recipe import Recipe, build_dataset
from ..io.model_folder import check_output, staged_folder
from ..io.positions_lab import result_row, save_variant_folder, write_results_csv
from .console import say


def add_parser(sub) -> None:
    parser = sub.add_parser("positions-lab", help="retrain the positions laboratory's variants (sum, "
                                                  "learned, concat, rotary, none) and measure them")
    parser.add_argument("--out", required=True, help="a new folder: the models, results.csv, "
                                                     "results.json, figures (PNG)")
    parser.add_argument("--steps", type=int, default=3000, help="training steps per model (default 3000)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 (default 1)")
    parser.add_argument("--variant", action="append",
                        help="only this variant (repeatable; default all five)")
    parser.set_defaults(run=run_positions_lab)


def run_positions_lab(args: argparse.Namespace,
                      figures: Optional[Callable[[Path, Callable[[str], None]], list]] = None) -> int:
    """`figures(folder, say)` writes the figures of the finished lab folder into it (default:
    the Positions tab's, rendered offscreen)."""
    if figures is None:
        from ..ui.positions.headless import write_lab_figures as figures
    out = Path(args.out).expanduser().absolute()
    variants = args.variant or list(lab.VARIANTS)
    unknown = [v for v in variants if v not in lab.VARIANTS]
    if unknown:
        raise ModelError(f"--variant {unknown[0]}: not one of {', '.join(lab.VARIANTS)}")
    if args.steps < 1 or args.seeds < 1:
        raise ModelError("--steps and --seeds must be at least 1")
    check_output(out)
    rows, curves, started = [], {}, time.perf_counter()
    with staged_folder(out) as tmp:
        for seed in range(args.seeds):
            base = Recipe(steps=args.steps, seed=seed)
            dataset = build_dataset(base)                 # one corpus for every variant
            for variant in variants:
                begun = time.perf_counter()
                trained = lab.train_variant(variant, base, dataset)
                name = variant if args.seeds == 1 else f"{variant}-seed{seed}"
                folder = tmp / name
                folder.mkdir()
                save_variant_folder(folder, trained)
                row = result_row(trained)
                rows.append(row)
                curves[name] = trained.result["curve"]
                say(f"{name}: held-out loss {row['heldout_loss']:.4f}, accuracy "
                    f"{row['heldout_accuracy']:.4f} ({time.perf_counter() - begun:.0f} s)")
        write_results_csv(tmp / "results.csv", rows)
        (tmp / "results.json").write_text(json.dumps({"rows": rows, "curves": curves}, indent=1))
        n_figures = len(figures(tmp, say)) if figures is not None else 0
    say(f"wrote {out}: {len(rows)} models, results.csv, results.json"
        + (f", {n_figures} figures" if n_figures else "") + f" ({time.perf_counter() - started:.0f} s)")
    return 0
