"""A model folder the loader opens, written so that nothing is ever left half-written: checked
first, filled under a temporary name beside its place (`staged_folder`) and renamed at the very
end, so an error or Ctrl-C never leaves a half-written model where a complete one was expected.
Used by `transformer-stepper train` and `positions-lab`, and by the Training view's Save Model.

    config.json        model_type transformer-stepper, the core's ModelConfig
    model.safetensors  the core's parameter names
    tokenizer.json, recipe.json (how it was made, and what it measured)
    history.npz        with a training history: losses, E snapshots (see docs/cli.md, "Train")"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..core.model.errors import ModelError
from ..core.training.history import TrainingHistory
from ..core.training.recipe import TrainedModel

MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "recipe.json")
HISTORY_FILE = "history.npz"


def save_history(path: Path, history: TrainingHistory, tokenizer) -> None:
    """history.npz: plain arrays (no pickle), keys as TrainingHistory.to_arrays."""
    vocabulary = [tokenizer.id_to_token(i) for i in range(len(history.classes))]
    np.savez(path, **history.to_arrays(vocabulary))


def save_model_folder(folder: Path, trained: TrainedModel,
                      history: Optional[TrainingHistory] = None) -> None:
    """config.json (model_type transformer-stepper), model.safetensors (the core's parameter
    names), tokenizer.json, recipe.json (how it was made, and what it measured), and with a
    history, history.npz."""
    from safetensors.numpy import save_file

    folder = Path(folder)
    config = {
        "model_type": "transformer-stepper",
        "stepper_config": trained.config.to_dict(),
        "description": "The built-in teaching model: a causal decoder with sinusoidal positions, "
                       "trained by transformer_stepper.core.training on its generated corpus.",
        "recipe": "recipe.json",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    tensors = {name: np.ascontiguousarray(value, dtype=np.float32)
               for name, value in sorted(trained.params.items())}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "np"})
    trained.tokenizer.save(str(folder / "tokenizer.json"), pretty=True)
    recipe = {
        "recipe": trained.recipe.to_dict(),
        "result": trained.result,
        "command": f"transformer-stepper train --out DIR --recipe "
                   f"{'quick' if trained.recipe.name == 'quick' else 'builtin'} "
                   f"--steps {trained.recipe.steps} --seed {trained.recipe.seed}",
    }
    (folder / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
    files = list(MODEL_FILES)
    if history is not None:
        save_history(folder / HISTORY_FILE, history, trained.tokenizer)
        files.append(HISTORY_FILE)
    umask = os.umask(0)
    os.umask(umask)
    for name in files:   # safetensors writes 0600; make the files as readable as the rest
        os.chmod(folder / name, 0o666 & ~umask)


def check_output(out: Path, force: bool = False) -> None:
    """The folder must be creatable, and must not hold something we would overwrite."""
    from .array_export import check_name_length

    check_name_length(out)
    parent = out.parent
    if not parent.exists():
        raise ModelError(f"{parent}: folder does not exist (create it, or choose another --out)")
    if not parent.is_dir():
        raise ModelError(f"{parent}: not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ModelError(f"{parent}: folder is not writable")
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise ModelError(f"{out}: exists and is not a folder")
        if any(out.iterdir()) and not force:
            raise ModelError(f"{out}: folder exists and is not empty; remove it or choose another --out")


def _temporary_folder(out: Path, suffix: str) -> Path:
    """A new, uniquely named folder beside `out` (created with the umask's permissions,
    unlike tempfile.mkdtemp's 0700, so the renamed model is readable like any other)."""
    for _ in range(100):
        # short whatever out's name is: any --out legal as a name is legal with this beside it
        candidate = out.parent / f".ts{uuid.uuid4().hex[:10]}{suffix}"
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {out}")


def _install(tmp: Path, out: Path) -> None:
    """Move the finished folder into place; an existing one (empty, or --force) is replaced."""
    if out.exists():
        old = _temporary_folder(out, ".old")
        os.replace(out, old / out.name)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)


@contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A new folder beside `out` to write into: moved into place when the block ends, removed
    when it raises (an interruption included), so nothing is left half-written. An OSError
    becomes a ModelError naming the folder."""
    try:
        tmp = _temporary_folder(out, ".part")
    except OSError as exc:
        raise ModelError(f"{out.parent}: cannot write ({exc.strerror or exc})") from None
    try:
        yield tmp
        _install(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelError(f"{out}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_model_folder(out: Path, trained: TrainedModel,
                       history: Optional[TrainingHistory] = None) -> None:
    """Write a trained model (and its history) to `out` as `train` does: checked first, written
    into a temporary folder beside it, renamed at the end; nothing is left half-written."""
    out = Path(out).expanduser().absolute()
    check_output(out)
    with staged_folder(out) as tmp:
        save_model_folder(tmp, trained, history)
