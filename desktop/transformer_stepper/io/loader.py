"""One entry point for every weight file: `load_model(path)` -> core Model.

Accepted: an HF folder (config.json + model.safetensors or a sharded index, + tokenizer.json),
a lone .safetensors (family inferred from tensor names; tokenizer.json beside it), the
project's own .npz (see npz_format.py). Pickle files are refused, never opened."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..core.config import ModelConfig
from ..core.errors import ModelError
from ..core.forward import expected_shapes
from ..core.model import Model
from ..core.tokenize import Tokenizer
from . import keymaps, npz_format
from .resources import builtin_model_dir
from .safetensors_file import SafetensorsFile

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
        try:
            weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
            if not isinstance(weight_map, dict):
                raise ValueError("weight_map is not an object")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{index_path}: not a valid safetensors index ({exc})") from None
        files: dict[str, SafetensorsFile] = {}
        where: dict[str, str] = {}
        for name, shard in weight_map.items():
            shard_path = index_path.parent / shard
            if str(shard_path) not in files:
                if not shard_path.is_file():
                    raise ModelError(f"{index_path}: shard {shard} is missing")
                files[str(shard_path)] = SafetensorsFile(shard_path)
            if name not in files[str(shard_path)].entries:
                raise ModelError(f"{shard_path}: tensor {name} listed in the index is not in the shard")
            where[name] = str(shard_path)
        return cls(files, where, str(index_path))

    def names(self) -> set[str]:
        return set(self.where)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.files[self.where[name]].shape(name)

    def get(self, name: str) -> np.ndarray:
        return self.files[self.where[name]].get(name)

    @property
    def metadata(self) -> dict:
        merged: dict = {}
        for f in self.files.values():
            merged.update(f.metadata)
        return merged


# ------------------------------------------------------------------------------ config
def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path}: expected a JSON object")
    return data


def config_from_hf(cfg: dict, source: str, names: set[str]) -> ModelConfig:
    model_type = cfg.get("model_type")
    if model_type == "transformer-stepper":
        try:
            return ModelConfig.from_dict(cfg["stepper_config"])
        except (KeyError, TypeError) as exc:
            raise ModelError(f"{source}: bad stepper_config ({exc})") from None
    if model_type == "bert":
        has_head = any(n.endswith("cls.predictions.transform.dense.weight") for n in names)
        return keymaps.bert_config(cfg, source, has_head)
    if model_type == "gpt2":
        return keymaps.gpt2_config(cfg, source)
    raise ModelError(f"{source}: unsupported architecture model_type={model_type!r} "
                     f"(supported: bert, gpt2, transformer-stepper)")


def infer_config(ckpt: Checkpoint, family: str, warnings: list[str]) -> ModelConfig:
    """A lone safetensors without config.json: dimensions from shapes. The head count is
    not in any shape, so it assumes d_head = 64 (BERT-base and GPT-2 both use 64)."""
    names = ckpt.names()
    if family == "gpt2":
        prefix = keymaps.strip_prefix(iter(names), ("transformer.",))
        n_vocab, d_model = ckpt.shape(prefix + "wte.weight")
        n_ctx = ckpt.shape(prefix + "wpe.weight")[0]
        d_ff = ckpt.shape(prefix + "h.0.mlp.c_fc.weight")[1]
        n_layer = keymaps.count_layers(names, "h.")
        cfg = {"model_type": "gpt2", "vocab_size": n_vocab, "n_embd": d_model, "n_positions": n_ctx,
               "n_inner": d_ff, "n_layer": n_layer, "n_head": max(1, d_model // 64)}
    else:
        prefix = keymaps.strip_prefix(iter(names), ("bert.",))
        n_vocab, d_model = ckpt.shape(prefix + "embeddings.word_embeddings.weight")
        cfg = {"model_type": "bert", "vocab_size": n_vocab, "hidden_size": d_model,
               "max_position_embeddings": ckpt.shape(prefix + "embeddings.position_embeddings.weight")[0],
               "type_vocab_size": ckpt.shape(prefix + "embeddings.token_type_embeddings.weight")[0],
               "intermediate_size": ckpt.shape(prefix + "encoder.layer.0.intermediate.dense.weight")[0],
               "num_hidden_layers": keymaps.count_layers(names, "encoder.layer."),
               "num_attention_heads": max(1, d_model // 64)}
    warnings.append(f"{ckpt.source}: no config.json; inferred the shapes and assumed "
                    f"{cfg.get('n_head') or cfg.get('num_attention_heads')} heads of 64")
    return config_from_hf(cfg, ckpt.source, names)


# ------------------------------------------------------------------------------ params
def _map_params(ckpt: Checkpoint, config: ModelConfig) -> dict[str, np.ndarray]:
    names = ckpt.names()
    if config.family == "gpt2":
        prefix = keymaps.strip_prefix(iter(names), ("transformer.",))
        keymap = keymaps.gpt2_keymap(config)
    elif config.family == "bert":
        prefix = keymaps.strip_prefix(iter(names), ("bert.",))
        old_style = any(n.endswith("LayerNorm.gamma") for n in names)
        keymap = keymaps.bert_keymap(config, ("gamma", "beta") if old_style else ("weight", "bias"))
    else:
        prefix, keymap = "", [(name, name, None) for name in expected_shapes(config)]
    shapes = expected_shapes(config)
    params: dict[str, np.ndarray] = {}
    for core_name, ckpt_name, transform in keymap:
        # BERT's MLM head lives outside the bert. prefix ("cls.predictions...")
        full = ckpt_name if ckpt_name.startswith("cls.") else prefix + ckpt_name
        if full not in names:
            raise ModelError(f"{ckpt.source}: missing tensor {full}")
        value = ckpt.get(full)
        if transform is not None:
            value = transform(value)
        if value.shape != shapes[core_name]:
            raise ModelError(f"{ckpt.source}: tensor {full} has shape {ckpt.shape(full)}, "
                             f"which does not fit the config (d_model={config.d_model}, "
                             f"n_vocab={config.n_vocab}, d_ff={config.d_ff})")
        params[core_name] = value
    return params


def _find_tokenizer(folder: Path, source: str) -> Tokenizer:
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise ModelError(f"{source}: no tokenizer.json beside the weights")
    return Tokenizer.from_file(path)


def _display_name(folder: Path, cfg: dict) -> str:
    parts = folder.resolve().parts
    if "snapshots" in parts:  # HF cache: .../models--org--name/snapshots/<hash>
        repo = parts[parts.index("snapshots") - 1]
        if repo.startswith("models--"):
            return repo[len("models--"):].replace("--", "/")
    if folder.name.lower() in _GENERIC_FOLDER_NAMES:
        return folder.parent.name or cfg.get("_name_or_path") or folder.name
    return folder.name


def _refuse_pickle(path: Path) -> None:
    raise ModelError(f"{path}: pickle-based weights are never opened (they can run code); "
                     f"{CONVERT_HINT}")


def _from_checkpoint(ckpt: Checkpoint, folder: Path, cfg: Optional[dict], name: str,
                     warnings: list[str]) -> Model:
    names = ckpt.names()
    if cfg is None:
        meta_cfg = ckpt.metadata.get("config")
        if meta_cfg:
            try:
                cfg = json.loads(meta_cfg)
            except ValueError:
                raise ModelError(f"{ckpt.source}: metadata 'config' is not valid JSON") from None
    if cfg is not None:
        config = config_from_hf(cfg, str(folder / "config.json"), names)
    else:
        family = keymaps.detect_family(names)
        if family is None or family == "stepper":
            raise ModelError(f"{ckpt.source}: cannot tell the architecture from the tensor names "
                             f"and there is no config.json beside it")
        config = infer_config(ckpt, family, warnings)
    config = config.replace(name=name)
    params = _map_params(ckpt, config)
    model = Model(config, params, _find_tokenizer(folder, ckpt.source), source=ckpt.source)
    model.warnings = warnings
    return model


def load_folder(folder: Path) -> Model:
    cfg_path = folder / "config.json"
    cfg = _read_json(cfg_path) if cfg_path.is_file() else None
    name = _display_name(folder, cfg or {})
    index = folder / "model.safetensors.index.json"
    single = folder / "model.safetensors"
    if index.is_file():
        ckpt = Checkpoint.sharded(index)
    elif single.is_file():
        ckpt = Checkpoint.single(single)
    else:
        others = sorted(folder.glob("*.safetensors"))
        npz = sorted(folder.glob("*.npz"))
        if len(others) == 1:
            ckpt = Checkpoint.single(others[0])
        elif npz:
            return load_npz(npz[0])
        else:
            pickles = [p for p in sorted(folder.iterdir()) if p.suffix in PICKLE_SUFFIXES]
            if pickles:
                _refuse_pickle(pickles[0])
            raise ModelError(f"{folder}: no model.safetensors, sharded index or .npz weights found")
    if cfg is None:
        raise ModelError(f"{folder}: no config.json in the model folder")
    return _from_checkpoint(ckpt, folder, cfg, name, [])


def load_lone_safetensors(path: Path) -> Model:
    ckpt = Checkpoint.single(path)
    cfg_path = path.parent / "config.json"
    cfg = _read_json(cfg_path) if cfg_path.is_file() else None
    return _from_checkpoint(ckpt, path.parent, cfg, path.stem, [])


def load_npz(path: Path) -> Model:
    config, params, tokenizer_json = npz_format.read(path)
    if tokenizer_json is not None:
        tokenizer = Tokenizer.from_json(tokenizer_json, f"{path} (embedded tokenizer)")
    else:
        tokenizer = _find_tokenizer(path.parent, str(path))
    model = Model(config.replace(name=config.name or path.stem), params, tokenizer, source=str(path))
    model.warnings = []
    return model


def load_model(path: str | Path | None = None) -> Model:
    """Open any supported weight file or folder; None opens the built-in teaching model."""
    path = Path(path).expanduser() if path is not None else builtin_model_dir()
    if not path.exists():
        raise ModelError(f"{path}: no such file or folder")
    if path.is_dir():
        return load_folder(path)
    suffix = path.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        _refuse_pickle(path)
    if suffix == ".safetensors":
        return load_lone_safetensors(path)
    if suffix == ".npz":
        return load_npz(path)
    if path.name.endswith(".safetensors.index.json"):
        cfg_path = path.parent / "config.json"
        if not cfg_path.is_file():
            raise ModelError(f"{path.parent}: no config.json beside the index")
        return _from_checkpoint(Checkpoint.sharded(path), path.parent, _read_json(cfg_path),
                                _display_name(path.parent, {}), [])
    if path.name == "config.json" or path.name == "tokenizer.json":
        return load_folder(path.parent)
    raise ModelError(f"{path}: unsupported file type {suffix or '(none)'}; open an HF folder, "
                     f".safetensors or .npz")
