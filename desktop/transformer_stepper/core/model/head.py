"""The output head's parts: what it reads of the last hidden state, BERT's masked-LM transform,
the vocabulary product (tied to wte or the model's own lm_head.w) and a token's output
direction. Stage 12 itself, lm_head, is in core/model/forward.py."""
from __future__ import annotations

import numpy as np

from . import ops
from .config import ModelConfig
from .params import rows, times_rows_transposed


def head_input(config: ModelConfig, h: np.ndarray) -> np.ndarray:
    # [..., d_model] -> what the output head multiplies: all of h, or, when the head is tied to
    # a concat model's wte [n_vocab, d_token], its token part h[..., :d_token]
    return h[..., :config.d_token] if config.tied_head and config.d_token != config.d_model else h


def output_direction(params, config: ModelConfig, token_id: int) -> np.ndarray:
    """[d_model]: the vector whose dot product with the head's input is token_id's logit (a
    row of wte or lm_head.w; zero over a tied concat model's position part, which the head
    does not read)."""
    row = rows(params, head_table(config), np.array([token_id]))[0]
    if row.shape[-1] == config.d_model:
        return row
    return np.concatenate([row, np.zeros(config.d_model - row.shape[-1], dtype=row.dtype)])


def head_hidden(params, config: ModelConfig, h, record) -> np.ndarray:
    # [n_seq, d_model] -> [n_seq, d_model]: what the vocabulary product reads (BERT's masked-LM
    # head first transforms h: dense, activation, LayerNorm; recorded as head_transform)
    if not config.lm_head_transform:
        return h
    t = ops.linear(h, params["head.transform.w"], params["head.transform.b"])
    t = ops.ACTIVATIONS[config.activation](t)
    _, h = ops.layer_norm(t, params["head.ln.g"], params["head.ln.b"], config.ln_eps)
    record("head_transform", h, None)
    return h


def head_table(config: ModelConfig) -> str:
    """The parameter the output head multiplies by: wte (tied) or the model's own lm_head.w."""
    return "wte" if config.tied_head else "lm_head.w"


def head_product(params, config: ModelConfig, h) -> np.ndarray:
    # [n, d_model] -> [n, n_vocab]: h times the head's table, no bias (linear in h). Concat
    # models with a tied head read only the token part (see head_input)
    return times_rows_transposed(head_input(config, h), params, head_table(config))


def vocabulary_logits(params, config: ModelConfig, h) -> np.ndarray:
    # [n, d_model] (head_hidden's output) -> [n, n_vocab]: the decoder tied to wte, or the
    # model's own head, plus the MLM head's bias
    logits = head_product(params, config, h)
    if config.lm_head_transform and "head.bias" in params:
        logits += params["head.bias"]
    if config.final_softcap:                                # Gemma 2: cap·tanh(logits / cap)
        logits = ops.soft_cap(logits, config.final_softcap, out=logits)
    return logits
