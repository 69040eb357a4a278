"""Marian / OPUS-MT: the layout of "Attention Is All You Need" — static sinusoidal positions
(HF's MarianSinusoidalPositionalEmbedding: sines in the first half of each vector, cosines in
the second, not interleaved; computed at open, never stored), embeddings × √d_model, post-LN,
SiLU ("swish"), one vocabulary shared by source and target, tied head + final_logits_bias.
The positions are handed to the core as a fixed table of rows (position="learned" with the
computed table): the same numbers HF adds, labelled in docs/models.md."""
from __future__ import annotations

import numpy as np

from ...core.model.errors import ModelError
from ...core.model.seq2seq import Seq2SeqConfig
from .bart import seq2seq_config, stacks_keymap
from .common import KeyMap, flag

MODEL_TYPES = ("marian",)
LAYER_MARKER = "layers."
SEQ2SEQ = True


def detect(names: set[str]) -> bool:
    return (any(n.endswith("encoder_attn.k_proj.weight") for n in names)
            and not any(n.endswith("layernorm_embedding.weight") for n in names))


def config_from_hf(cfg: dict, source: str, names: set[str], warnings: list[str]) -> Seq2SeqConfig:
    if not flag(cfg, "share_encoder_decoder_embeddings", source, True):
        raise ModelError(f"{source}: separate source and target vocabularies "
                         f"(share_encoder_decoder_embeddings false) are not supported")
    if cfg.get("normalize_before"):
        raise ModelError(f"{source}: normalize_before=true (pre-LN Marian) is not supported")
    config = seq2seq_config(cfg, source, "marian", pre_ln=False, position="learned",
                            embed_norm=False, position_offset=0)
    pad = config.pad_token_id
    start = cfg.get("decoder_start_token_id", pad)
    return config.replace(decoder_start_token_id=pad if start is None else start)


def sinusoids(n_ctx: int, d_model: int) -> np.ndarray:
    # [n_ctx, d_model]: HF Marian's table, [sin(pos·ω_j) for each pair j | cos(pos·ω_j)]
    j = np.arange(d_model)
    angles = np.arange(n_ctx)[:, None] / np.power(10000, 2 * (j // 2) / d_model)[None, :]
    half = d_model // 2 + d_model % 2
    table = np.empty((n_ctx, d_model), dtype=np.float32)
    table[:, :half] = np.sin(angles[:, 0::2])
    table[:, half:] = np.cos(angles[:, 1::2])
    return table


def computed_params(config: Seq2SeqConfig) -> dict[str, np.ndarray]:
    table = sinusoids(config.encoder.n_ctx, config.encoder.d_model)
    return {"encoder.wpe": table, "decoder.wpe": table.copy()}


def keymap(config: Seq2SeqConfig, names: set[str]) -> KeyMap:
    return stacks_keymap(config, names)


def infer_hf_config(shape, names: set[str]) -> dict:
    raise ModelError("a Marian checkpoint needs its config.json beside it")
