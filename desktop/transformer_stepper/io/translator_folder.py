"""The built-in translator as a model folder the loader opens like any Marian checkpoint:
config.json (model_type marian), model.safetensors under HF Marian's names (the family's own
key map, inverted), tokenizer.json, recipe.json (how it was made and what it measured)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..core.model.seq2seq import Seq2SeqConfig
from .families import marian
from .families.common import TRANSPOSE


def config_from_recipe(hf_config: dict, source: str = "translator") -> Seq2SeqConfig:
    return marian.config_from_hf(hf_config, source, set(), [])


def positions(config: Seq2SeqConfig) -> np.ndarray:
    """The sinusoid table the loader computes for this config (Marian's layout)."""
    return marian.computed_params(config)["encoder.wpe"]


def save_translator(folder: Path, hf_config: dict, config: Seq2SeqConfig, params: dict,
                    tokenizer, recipe: dict) -> None:
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names = {"model.shared.weight"}
    tensors = {}
    for core_name, full, transform in marian.keymap(config, names):
        value = np.asarray(params[core_name], dtype=np.float32)
        if transform is TRANSPOSE:
            value = value.T
        elif core_name == "final_logits_bias":
            value = value.reshape(1, -1)
        tensors[full] = np.ascontiguousarray(value)
    (folder / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n", encoding="utf-8")
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save(str(folder / "tokenizer.json"), pretty=True)
    (folder / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
