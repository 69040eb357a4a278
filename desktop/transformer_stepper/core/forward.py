"""ONE forward pass. Every intermediate goes through `record(name, array, layer)`, so the
trace the stepper shows is produced by the very code that computes the output.

Parameters use one naming scheme for every family (the loaders map checkpoints onto it):
  wte [n_vocab, d_model]   wpe [n_ctx, d_model] (learned only)   wtt [n_types, d_model]
  ln_emb.{g,b}             h.{i}.ln_1.{g,b}   h.{i}.ln_2.{g,b}   ln_f.{g,b}
  h.{i}.attn.{q,k,v,o}.{w,b}   w stored [d_in, d_out]
  h.{i}.mlp.fc.{w,b} [d_model, d_ff]   h.{i}.mlp.proj.{w,b} [d_ff, d_model]
  head.transform.{w,b}  head.ln.{g,b}  head.bias   (BERT's masked-LM head)
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from . import ops
from .config import ModelConfig

Recorder = Optional[Callable[[str, np.ndarray, Optional[int]], None]]


def _noop(name: str, value: np.ndarray, layer: Optional[int] = None) -> None:
    pass


def position_table(config: ModelConfig, params: Mapping[str, np.ndarray], n_seq: int) -> np.ndarray:
    # -> [n_seq, d_model]: learned rows, or the fixed sinusoids
    if config.position == "sinusoidal":
        return ops.sinusoid_table(n_seq, config.d_model)
    return params["wpe"][:n_seq]


def embed(params, config: ModelConfig, input_ids, token_type_ids, record) -> np.ndarray:
    # [n_seq] ids -> [n_seq, d_model]
    n_seq = len(input_ids)
    token_embeddings = params["wte"][input_ids]          # one-hot x E = row selection
    position_embeddings = position_table(config, params, n_seq)
    record("token_embeddings", token_embeddings, None)
    record("position_embeddings", position_embeddings, None)
    x = token_embeddings + position_embeddings
    if config.n_token_types:
        token_type_embeddings = params["wtt"][token_type_ids]
        record("token_type_embeddings", token_type_embeddings, None)
        x += token_type_embeddings
    record("embedding_sum", x, None)
    if config.embed_norm:
        normalized, x = ops.layer_norm(x, params["ln_emb.g"], params["ln_emb.b"], config.ln_eps)
        record("embedding_ln_normalized", normalized, None)
    record("embedding_output", x, None)
    return x


def attention(params, config: ModelConfig, x, mask, layer: int, record) -> np.ndarray:
    # [n_seq, d_model], [n_seq, n_seq] additive mask (0 / -inf) or None -> [n_seq, d_model]
    p = f"h.{layer}.attn."
    record("attn_in", x, layer)
    q = ops.split_heads(ops.linear(x, params[p + "q.w"], params[p + "q.b"]), config.n_head)
    k = ops.split_heads(ops.linear(x, params[p + "k.w"], params[p + "k.b"]), config.n_head)
    v = ops.split_heads(ops.linear(x, params[p + "v.w"], params[p + "v.b"]), config.n_head)
    record("q", q, layer)                                  # [n_head, n_seq, d_head]
    record("k", k, layer)
    record("v", v, layer)
    scores_raw = q @ k.transpose(0, 2, 1)                 # [n_head, n_seq, n_seq]
    record("scores_raw", scores_raw, layer)
    scores = scores_raw * np.float32(1.0 / np.sqrt(config.d_head))
    if mask is not None:
        scores += mask                                     # 0 where allowed, -inf where blocked
    record("scores", scores, layer)
    weights = ops.softmax(scores)
    record("attn_weights", weights, layer)
    head_outputs = weights @ v                             # [n_head, n_seq, d_head]
    record("head_outputs", head_outputs, layer)
    heads_concat = ops.merge_heads(head_outputs)          # [n_seq, d_model]
    record("heads_concat", heads_concat, layer)
    attn_out = ops.linear(heads_concat, params[p + "o.w"], params[p + "o.b"])
    record("attn_out", attn_out, layer)
    return attn_out


def feed_forward(params, config: ModelConfig, x, layer: int, record) -> np.ndarray:
    # [n_seq, d_model] -> [n_seq, d_model]
    p = f"h.{layer}.mlp."
    record("mlp_in", x, layer)
    pre_act = ops.linear(x, params[p + "fc.w"], params[p + "fc.b"])   # [n_seq, d_ff]
    record("mlp_pre_act", pre_act, layer)
    act = ops.ACTIVATIONS[config.activation](pre_act)
    record("mlp_act", act, layer)
    out = ops.linear(act, params[p + "proj.w"], params[p + "proj.b"])
    record("mlp_out", out, layer)
    return out


def _norm(params, config, name, x, layer, record):
    record(f"{name}_in", x, layer)
    normalized, out = ops.layer_norm(x, params[f"h.{layer}.{name}.g"], params[f"h.{layer}.{name}.b"],
                                     config.ln_eps)
    record(f"{name}_normalized", normalized, layer)
    record(f"{name}_out", out, layer)
    return out


def block(params, config: ModelConfig, x, mask, layer: int, record) -> np.ndarray:
    # [n_seq, d_model] -> [n_seq, d_model]; ln_1 belongs to attention, ln_2 to the feed-forward
    record("layer_in", x, layer)
    if config.norm == "pre":
        x = x + attention(params, config, _norm(params, config, "ln_1", x, layer, record), mask, layer, record)
        record("attn_residual", x, layer)
        x = x + feed_forward(params, config, _norm(params, config, "ln_2", x, layer, record), layer, record)
        record("mlp_residual", x, layer)
    else:
        x = x + attention(params, config, x, mask, layer, record)
        record("attn_residual", x, layer)
        x = _norm(params, config, "ln_1", x, layer, record)
        x = x + feed_forward(params, config, x, layer, record)
        record("mlp_residual", x, layer)
        x = _norm(params, config, "ln_2", x, layer, record)
    record("layer_out", x, layer)
    return x


def lm_head(params, config: ModelConfig, h, record) -> np.ndarray:
    # [n_seq, d_model] -> [n_seq, n_vocab], the decoder tied to wte
    if config.lm_head_transform:
        t = ops.linear(h, params["head.transform.w"], params["head.transform.b"])
        t = ops.ACTIVATIONS[config.activation](t)
        _, h = ops.layer_norm(t, params["head.ln.g"], params["head.ln.b"], config.ln_eps)
        record("head_transform", h, None)
    logits = h @ params["wte"].T
    if "head.bias" in params:
        logits += params["head.bias"]
    record("logits", logits, None)
    return logits


def attention_mask(config: ModelConfig, n_seq: int) -> Optional[np.ndarray]:
    # -> [n_seq, n_seq] additive (0 where a query may look, -inf where not), or None (no mask).
    # The additive form is one broadcast add instead of a boolean scatter.
    return ops.additive_mask(ops.causal_mask(n_seq)) if config.causal else None


def forward(params: Mapping[str, np.ndarray], config: ModelConfig, input_ids: np.ndarray,
            token_type_ids: np.ndarray | None = None, record: Recorder = None,
            mask: Optional[np.ndarray] = None) -> dict:
    """[n_seq] ids -> {"last_hidden_state": [n_seq, d_model], "logits": [n_seq, n_vocab] or None}.
    `mask` is attention_mask(config, n_seq), passed in when the caller keeps it."""
    record = record or _noop
    input_ids = np.asarray(input_ids, dtype=np.int64)
    if token_type_ids is None:
        token_type_ids = np.zeros_like(input_ids)
    if mask is None:
        mask = attention_mask(config, len(input_ids))
    x = embed(params, config, input_ids, token_type_ids, record)
    for layer in range(config.n_layer):
        x = block(params, config, x, mask, layer, record)
    if config.final_norm:
        normalized, x = ops.layer_norm(x, params["ln_f.g"], params["ln_f.b"], config.ln_eps)
        record("final_ln_normalized", normalized, None)
        record("final_ln_out", x, None)
    logits = lm_head(params, config, x, record) if config.lm_head else None
    return {"last_hidden_state": x, "logits": logits}


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter the forward pass reads, with its shape (loaders check against it)."""
    d, f = config.d_model, config.d_ff
    shapes: dict[str, tuple[int, ...]] = {"wte": (config.n_vocab, d)}
    if config.position == "learned":
        shapes["wpe"] = (config.n_ctx, d)
    if config.n_token_types:
        shapes["wtt"] = (config.n_token_types, d)
    if config.embed_norm:
        shapes.update({"ln_emb.g": (d,), "ln_emb.b": (d,)})
    for i in range(config.n_layer):
        for name in ("q", "k", "v", "o"):
            shapes[f"h.{i}.attn.{name}.w"] = (d, d)
            shapes[f"h.{i}.attn.{name}.b"] = (d,)
        for name in ("ln_1", "ln_2"):
            shapes[f"h.{i}.{name}.g"] = (d,)
            shapes[f"h.{i}.{name}.b"] = (d,)
        shapes.update({f"h.{i}.mlp.fc.w": (d, f), f"h.{i}.mlp.fc.b": (f,),
                       f"h.{i}.mlp.proj.w": (f, d), f"h.{i}.mlp.proj.b": (d,)})
    if config.final_norm:
        shapes.update({"ln_f.g": (d,), "ln_f.b": (d,)})
    if config.lm_head_transform:
        shapes.update({"head.transform.w": (d, d), "head.transform.b": (d,),
                       "head.ln.g": (d,), "head.ln.b": (d,), "head.bias": (config.n_vocab,)})
    return shapes
