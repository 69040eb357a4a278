"""One entry point for every weight file: `load_model(path)` -> core Model.

Accepted: an HF folder (config.json + model.safetensors or a sharded index, + tokenizer.json),
a lone .safetensors (family inferred from tensor names; tokenizer.json beside it), a .gguf
(llama.cpp's format, see gguf_load.py), the project's own .npz (see npz_format.py). Pickle files are refused, never opened.
Every problem a user can cause surfaces as a one-line ModelError naming the file."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import numpy as np

from ..core.model.config import ModelConfig
from ..core.model.errors import ModelError
from ..core.model.params import expected_shapes
from ..core.trace.model import Model
from ..core.model.tokenize import Tokenizer
from . import families, lone_file, npz_format
from .checkpoint_params import CheckpointParams
from .families.common import ASSUMED_D_HEAD, count_layers
from .resources import builtin_model_dir
from .safetensors_file import SafetensorsFile, file_identity, open_regular

PICKLE_SUFFIXES = {".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"}
CONVERT_HINT = ("convert it to safetensors with transformers: AutoModel.from_pretrained(DIR)"
                ".save_pretrained(OUT, safe_serialization=True)")
_GENERIC_FOLDER_NAMES = {"model", "models", "weights", "checkpoint", "snapshot"}


class Checkpoint:
    """Tensor names -> lazily read float32 arrays, across one or several safetensors files."""

    def __init__(self, files: dict[str, SafetensorsFile], where: dict[str, str], source: str) -> None:
        self.files, self.where, self.source = files, where, source

    @classmethod
    def single(cls, path: Path) -> "Checkpoint":
        f = SafetensorsFile(path)
        return cls({str(path): f}, {name: str(path) for name in f.keys()}, str(path))

    @classmethod
    def sharded(cls, index_path: Path) -> "Checkpoint":
        weight_map = _read_json(index_path).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ModelError(f"{index_path}: not a safetensors index (no 'weight_map' object)")
        files: dict[str, SafetensorsFile] = {}
        where: dict[str, str] = {}
        for name, shard in weight_map.items():
            if not isinstance(shard, str) or not shard:
                raise ModelError(f"{index_path}: tensor {name} maps to {shard!r}, not a file name")
            shard_path = shard_inside(index_path, name, shard)
            if str(shard_path) not in files:
                if not _present(shard_path):
                    raise ModelError(f"{index_path}: shard {shard} is missing")
                files[str(shard_path)] = SafetensorsFile(shard_path)
            if name not in files[str(shard_path)].entries:
                raise ModelError(f"{shard_path}: tensor {name} listed in the index is not in the shard")
            where[name] = str(shard_path)
        return cls(files, where, str(index_path))

    def names(self) -> set[str]:
        return set(self.where)

    def file_of(self, name: str) -> str:
        return self.where[name]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.files[self.where[name]].shape(name)

    def get(self, name: str) -> np.ndarray:
        return self.files[self.where[name]].get(name)

    def rows(self, name: str, index) -> np.ndarray:
        return self.files[self.where[name]].rows(name, index)

    def is_float32(self, name: str) -> bool:
        return self.files[self.where[name]].is_float32(name)

    def check_readable(self, name: str) -> None:
        self.files[self.where[name]].check_readable(name)

    def check_unchanged(self, name: Optional[str] = None) -> None:
        """The file holding `name` (every file, with None) is still the one opened."""
        for f in (self.files.values() if name is None else (self.files[self.where[name]],)):
            f.check_unchanged()

    @property
    def metadata(self) -> dict:
        merged: dict = {}
        for f in self.files.values():
            merged.update(f.metadata)
        return merged


def shard_inside(index_path: Path, name: str, shard: str) -> Path:
    """The shard's path, which must lie inside the index's folder: a relative name without
    '..' (an absolute path or '../other-model/' would trace another model's weights), and,
    once symlinks are followed, a file inside the folder or, for a Hugging Face cache snapshot
    (models--org--name/snapshots/<rev>/), inside that repository's blobs/ folder, where the
    cache keeps the files its snapshots link to."""
    folder = index_path.parent
    relative = Path(shard)
    if relative.is_absolute() or ".." in relative.parts or shard.startswith("~"):
        raise ModelError(f"{index_path}: tensor {name} maps to a shard outside the model folder "
                         f"({shard!r}); shards must be files in {folder}")
    path = folder / relative
    real, home = path.resolve(), folder.resolve()
    allowed = [home]
    if home.parent.name == "snapshots":
        allowed.append(home.parent.parent / "blobs")
    if not any(real == root or root in real.parents for root in allowed):
        raise ModelError(f"{index_path}: shard {shard} is a link to a file outside the model "
                         f"folder (refused)")
    return path


# ------------------------------------------------------------------------------ config
def _present(path: Path) -> bool:
    # there, whatever it is (a symlink to a device too: refused when opened, not "missing")
    return path.exists() or path.is_symlink()


_MAX_JSON = 64 << 20    # a config or index is kilobytes; refuse before reading gigabytes


def _read_json(path: Path) -> dict:
    size = file_identity(path)[2]
    if size > _MAX_JSON:
        raise ModelError(f"{path}: {size} bytes is too big for a JSON settings file (limit {_MAX_JSON})")
    try:
        with open_regular(path) as handle:
            text = handle.read(_MAX_JSON + 1).decode("utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:  # its message would quote the file's bytes
        raise ModelError(f"{path}: not valid JSON (not UTF-8 text)") from None
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ModelError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def config_from_hf(cfg: dict, source: str, names: set[str],
                   warnings: Optional[list[str]] = None) -> ModelConfig:
    family = families.by_model_type(cfg.get("model_type"), source)
    return family.config_from_hf(cfg, source, names, warnings if warnings is not None else [])


def _shape_reader(ckpt: Checkpoint):
    def shape(name: str, ndim: int) -> tuple[int, ...]:
        if name not in ckpt.where:
            raise ModelError(f"{ckpt.source}: missing tensor {name} (needed to infer the "
                             f"architecture without a config.json)")
        found = ckpt.shape(name)
        if len(found) != ndim:
            raise ModelError(f"{ckpt.file_of(name)}: tensor {name} has shape {found}, "
                             f"expected {ndim} dimensions")
        return found
    return shape


def infer_config(ckpt: Checkpoint, family, warnings: list[str]) -> tuple[ModelConfig, tuple[str, ...]]:
    """A lone safetensors without config.json: refused where its family or settings cannot be
    told (io/lone_file.py), else dimensions from shapes and every other setting guessed and
    named (-> the config and the guesses). The head count is not in any shape: the family
    assumes the common head width (64) unless q/k norms give it."""
    why = lone_file.refusal(ckpt, ckpt.names())
    if why:
        raise ModelError(f"{ckpt.source}: {why}")
    try:
        cfg = family.infer_hf_config(_shape_reader(ckpt), ckpt.names())
    except ModelError as exc:
        message = str(exc)
        raise ModelError(message if message.startswith(ckpt.source) else f"{ckpt.source}: {message}") from None
    d_model = cfg.get("hidden_size") or cfg.get("n_embd") or cfg.get("dim")
    heads_known = lone_file.head_width(ckpt, ckpt.names()) is not None
    if not heads_known and d_model % ASSUMED_D_HEAD:
        raise ModelError(f"{ckpt.source}: no config.json, and d_model={d_model} is not a multiple of "
                         f"{ASSUMED_D_HEAD}, so the head count cannot be assumed; put the "
                         f"model's config.json beside it")
    config = config_from_hf(cfg, ckpt.source, ckpt.names(), warnings)
    guessed = lone_file.describe(config, heads_known)
    warnings.append(f"{ckpt.source}: no config.json; sizes read from the tensor shapes, settings "
                    f"guessed: {', '.join(guessed)}; put the model's config.json beside it for "
                    f"exact numbers")
    return config, guessed


# ------------------------------------------------------------------------------ params
def _map_params(ckpt: Checkpoint, config: ModelConfig) -> CheckpointParams:
    """Every tensor the forward pass reads, shape-checked now and read on first use."""
    keymap = families.of_config(config).keymap(config, ckpt.names())
    shapes = expected_shapes(config)
    entries: dict[str, tuple[str, object]] = {}
    for core_name, full, transform in keymap:
        if full not in ckpt.where:
            raise ModelError(f"{ckpt.source}: missing tensor {full}")
        expected = transform.checkpoint_shape(shapes[core_name])
        actual = ckpt.shape(full)
        if actual != expected:
            raise ModelError(f"{ckpt.file_of(full)}: tensor {full} has shape {actual}, expected "
                             f"{expected} (d_model={config.d_model}, n_vocab={config.n_vocab}, "
                             f"n_ctx={config.n_ctx}, d_ff={config.d_ff})")
        ckpt.check_readable(full)
        entries[core_name] = (full, transform)
    return CheckpointParams(ckpt, entries, {name: shapes[name] for name in entries})


def _find_tokenizer(folder: Path) -> Tokenizer:
    path = folder / "tokenizer.json"
    if _present(path):
        file_identity(path)   # a FIFO or device is refused, not opened
    else:
        hint = ""
        if (folder / "vocab.txt").is_file() or (folder / "vocab.json").is_file():
            hint = ("; only a slow tokenizer's vocabulary is there: save a fast one with "
                    "AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR)")
        raise ModelError(f"{path}: not found (the tokenizer must sit beside the weights){hint}")
    return Tokenizer.from_file(path)


def _display_name(folder: Path, cfg: dict) -> str:
    stepper = cfg.get("stepper_config")
    if isinstance(stepper, dict) and isinstance(stepper.get("name"), str) and stepper["name"]:
        return stepper["name"]  # the project's own models carry their name
    parts = folder.resolve().parts
    if "snapshots" in parts:  # HF cache: .../models--org--name/snapshots/<hash>
        repo = parts[parts.index("snapshots") - 1]
        if repo.startswith("models--"):
            return repo[len("models--"):].replace("--", "/")
    if folder.name.lower() in _GENERIC_FOLDER_NAMES:
        fallback = cfg.get("_name_or_path")
        return folder.parent.name or (fallback if isinstance(fallback, str) else "") or folder.name
    return folder.name


def _refuse_pickle(path: Path) -> None:
    raise ModelError(f"{path}: pickle-based weights are never opened (they can run code); "
                     f"{CONVERT_HINT}")


def _metadata_config(ckpt: Checkpoint) -> Optional[dict]:
    # the project's own safetensors carry their config.json in the header metadata
    text = ckpt.metadata.get("config")
    if text is None:
        return None
    try:
        cfg = json.loads(text)
    except (ValueError, RecursionError):
        raise ModelError(f"{ckpt.source}: metadata 'config' is not valid JSON") from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{ckpt.source}: metadata 'config' is not a JSON object")
    return cfg


def _warn_unused_layers(ckpt: Checkpoint, config: ModelConfig, warnings: list[str]) -> None:
    # transformers also loads only the layers the config asks for, and says so
    try:
        found = count_layers(ckpt.names(), families.of_config(config).layer_marker)
    except ModelError as exc:
        raise ModelError(f"{ckpt.source}: {exc}") from None
    if found > config.n_layer:
        warnings.append(f"{ckpt.source}: the checkpoint has {found} layers but the config asks "
                        f"for {config.n_layer}; the extra layers are ignored")


def _from_checkpoint(ckpt: Checkpoint, folder: Path, cfg: Optional[dict], name: str) -> Model:
    names = ckpt.names()
    warnings: list[str] = []
    guessed: tuple[str, ...] = ()
    if cfg is not None:
        config = config_from_hf(cfg, str(folder / "config.json"), names, warnings)
    elif (meta := _metadata_config(ckpt)) is not None:
        config = config_from_hf(meta, f"{ckpt.source} (metadata)", names, warnings)
    else:
        family = families.detect(names)
        if family is None or family.name == "stepper":
            raise ModelError(f"{ckpt.source}: cannot tell the architecture from the tensor names "
                             f"and there is no config.json beside it")
        config, guessed = infer_config(ckpt, family, warnings)
    config = config.replace(name=name)
    if families.of_config(config).seq2seq:    # T5, BART, Marian
        from . import seq2seq_loader
        return seq2seq_loader.load(ckpt, folder, config, warnings,
                                   *seq2seq_loader.tokenizers(folder, _find_tokenizer))
    _warn_unused_layers(ckpt, config, warnings)
    params = _map_params(ckpt, config)
    model = Model(config, params, _find_tokenizer(folder), source=ckpt.source)
    model.warnings = warnings
    model.settings_guessed = guessed
    return model


def _weights_in(folder: Path) -> Checkpoint | Path:
    """The folder's weights: a Checkpoint, or the path of an .npz to open."""
    index, single = folder / "model.safetensors.index.json", folder / "model.safetensors"
    if _present(single):  # before the index, as transformers does
        return Checkpoint.single(single)
    if _present(index):
        return Checkpoint.sharded(index)
    files = sorted(p for p in folder.iterdir() if p.is_file())
    by_suffix = {suffix: [p for p in files if p.suffix.lower() == suffix] for suffix in (".safetensors", ".npz")}
    for suffix, found in by_suffix.items():
        if len(found) > 1:
            raise ModelError(f"{folder}: {len(found)} {suffix} files and no model.safetensors.index.json "
                             f"to say how they fit together; open one of the files")
        if found:
            return Checkpoint.single(found[0]) if suffix == ".safetensors" else found[0]
    pickles = [p for p in files if p.suffix.lower() in PICKLE_SUFFIXES]
    if pickles:
        _refuse_pickle(pickles[0])
    raise ModelError(f"{folder}: no model.safetensors, sharded index or .npz weights found")


def load_folder(folder: Path) -> Model:
    cfg_path = folder / "config.json"
    cfg = _read_json(cfg_path) if _present(cfg_path) else None
    weights = _weights_in(folder)
    if isinstance(weights, Path):
        return load_npz(weights)
    return _from_checkpoint(weights, folder, cfg, _display_name(folder, cfg or {}))


def load_lone_safetensors(path: Path) -> Model:
    ckpt = Checkpoint.single(path)
    cfg_path = path.parent / "config.json"
    cfg = _read_json(cfg_path) if _present(cfg_path) else None
    return _from_checkpoint(ckpt, path.parent, cfg, path.stem)


def load_npz(path: Path) -> Model:
    config, params, tokenizer_json = npz_format.read(path)
    if tokenizer_json is not None:
        tokenizer = Tokenizer.from_json(tokenizer_json, f"{path} (embedded tokenizer)")
    else:
        tokenizer = _find_tokenizer(path.parent)
    return Model(config.replace(name=config.name or path.stem), params, tokenizer, source=str(path))


def _is_gguf(path: Path) -> bool:
    with open_regular(path) as handle:         # a FIFO or device is refused, not waited on
        return handle.read(4) == b"GGUF"


def _load(path: Path) -> Model:
    if not path.exists():
        raise ModelError(f"{path}: no such file or folder")
    if path.is_dir():
        return load_folder(path)
    suffix = path.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        _refuse_pickle(path)
    if suffix == ".gguf" or _is_gguf(path):  # Ollama's blobs have no suffix
        from .gguf.load import load_gguf  # the gguf package is imported only for GGUF files
        return load_gguf(path)
    if suffix == ".safetensors":
        return load_lone_safetensors(path)
    if suffix == ".npz":
        return load_npz(path)
    if path.name.endswith(".safetensors.index.json"):
        cfg_path = path.parent / "config.json"
        if not _present(cfg_path):
            raise ModelError(f"{path.parent}: no config.json beside the index")
        return _from_checkpoint(Checkpoint.sharded(path), path.parent, _read_json(cfg_path),
                                _display_name(path.parent, {}))
    if path.name in ("config.json", "tokenizer.json"):
        return load_folder(path.parent)
    raise ModelError(f"{path}: unsupported file type {suffix or '(none)'}; open an HF folder, "
                     f".safetensors, .gguf or .npz")


def load_model(path: str | os.PathLike | None = None) -> Model:
    """Open any supported weight file or folder; None opens the built-in teaching model."""
    if path is None:
        resolved = builtin_model_dir()
    else:
        if not isinstance(path, (str, os.PathLike)):
            raise ModelError(f"model path must be a string or a path, got {type(path).__name__}")
        text = os.fspath(path)
        if not isinstance(text, str) or not text.strip():
            raise ModelError(f"model path {text!r} is empty or not text")
        if "\0" in text:
            raise ModelError(f"{text!r}: a path cannot contain a NUL character")
        try:
            resolved = Path(text).expanduser()
        except RuntimeError as exc:  # "~nosuchuser"
            raise ModelError(f"{text}: {exc}") from None
    try:
        return _load(resolved)
    except OSError as exc:  # permissions, name too long, a file vanishing mid-way ...
        raise ModelError(f"{exc.filename or resolved}: cannot read ({exc.strerror or exc})") from None
