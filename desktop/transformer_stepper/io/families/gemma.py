"""Gemma (the first generation): Llama's layout with RMSNorm gains stored as (weight) and used
as (1 + weight), token rows scaled by √d_model, GeGLU with tanh-GELU, an explicit head_dim, the
head tied to the embeddings. Gemma 2 and 3 are gemma2.py and gemma3.py."""
from __future__ import annotations

import numpy as np

from ...core.model.config import ModelConfig
from .common import ADD_ONE, KeyMap, activation, integer, prefixed, strip_prefix
from .gguf_layout import decoder_config as gguf_decoder_config, decoder_layout
from .llama import ACTIVATIONS, decoder_config, decoder_keymap
from .llama import infer_hf_config as llama_infer

MODEL_TYPES = ("gemma",)
LAYER_MARKER = "layers."


def detect(names: set[str]) -> bool:
    return False   # a lone Gemma file looks like Llama's; its config.json tells them apart


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> ModelConfig:
    d_model = integer(cfg, "hidden_size", source)
    # Hugging Face uses hidden_activation (tanh GELU unless set), not hidden_act
    act = activation(cfg, "hidden_activation", source, "gelu_pytorch_tanh", ACTIVATIONS)
    config = decoder_config({**cfg, "tie_word_embeddings": cfg.get("tie_word_embeddings", True)},
                            source, names, "gemma", activation=act,
                            embed_scale=float(np.float32(d_model ** 0.5)))
    return config


def keymap(config: ModelConfig, names: set[str]) -> KeyMap:
    return prefixed(decoder_keymap(config, norm_transform=ADD_ONE), strip_prefix(names, ("model.",)),
                    ("lm_head.",))


def infer_hf_config(shape, names: set[str]) -> dict:
    return {**llama_infer(shape, names), "model_type": "gemma"}


def _gguf_config(files: list, arch: str) -> dict:
    return {**gguf_decoder_config(files, arch, head_dim=True), "hidden_activation": "gelu_pytorch_tanh"}


# llama.cpp stores the RMSNorm gains as 1 + w (the family adds the 1 again)
GGUF_LAYOUTS = (decoder_layout(
    "gemma", _gguf_config, sentencepiece="gemma",
    fixes={f"{leaf}.weight": "minus_one"
           for leaf in ("attn_norm", "ffn_norm", "attn_q_norm", "attn_k_norm", "output_norm")}),)
