"""Train the positions laboratory's five variants over seeds; print and write what they measure.

    PYTHONPATH=desktop python tests/bench/positions_lab.py OUT_DIR [STEPS] [SEEDS]

OUT_DIR/<variant>-seed<S>/ model folders, OUT_DIR/results.csv, OUT_DIR/results.json (with the
training curves). One BLAS thread (the recipe's), one process: the machine is shared."""
import json
import sys
import time
from pathlib import Path

from transformer_stepper.core.training import positions_lab as lab
from transformer_stepper.core.training.recipe import Recipe, build_dataset
from transformer_stepper.io.positions_lab import result_row, save_variant_folder, write_results_csv


def main(out: Path, steps: int, seeds: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows, curves, started = [], {}, time.perf_counter()
    for seed in range(seeds):
        base = Recipe(steps=steps, seed=seed)
        dataset = build_dataset(base)
        for variant in lab.VARIANTS:
            t0 = time.perf_counter()
            trained = lab.train_variant(variant, base, dataset)
            folder = out / f"{variant}-seed{seed}"
            folder.mkdir(exist_ok=True)
            save_variant_folder(folder, trained)
            row = result_row(trained)
            rows.append(row)
            curves[f"{variant}-seed{seed}"] = trained.result["curve"]
            print(f"{variant:>15} seed {seed}: loss {row['heldout_loss']:.4f} acc {row['heldout_accuracy']:.4f} "
                  f"{trained.result['phenomena_accuracy']} probe {trained.result['position_probe_r2']} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
            write_results_csv(out / "results.csv", rows)
            (out / "results.json").write_text(json.dumps({"rows": rows, "curves": curves}, indent=1))
    print(f"wall time {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3000,
         int(sys.argv[3]) if len(sys.argv) > 3 else 3)
