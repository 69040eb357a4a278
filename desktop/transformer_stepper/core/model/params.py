"""Where the forward pass reads its weights from: a mapping name -> float32 array. A store may
read lazily (a big checkpoint widens bf16 per tensor on use, within a memory budget): it then
says each tensor's shape without reading it, gathers rows of a table without widening all of
it, and walks a table in row blocks. expected_shapes lists every name the pass reads.

Parameters use one naming scheme for every family (the loaders map checkpoints onto it):
  wte [n_vocab, d_token]   wpe [position_offset + n_ctx, d_model] (learned only)
                           d_token = d_model, or d_model - d_position for concat positions
  wtt [n_types, d_model]   ln_emb.{g,b}   ln_f.{g[,b]}   lm_head.w [n_vocab, d_model] (untied)
  h.{i}.ln_1.{g[,b]}  h.{i}.ln_2.{g[,b]}           .b only for LayerNorm, not RMSNorm
  h.{i}.attn.{q,k,v,o}.{w[,b]}   w stored [d_in, d_out]; k, v have n_kv_head heads
  h.{i}.attn.sinks [n_head]                         (attn_sinks: each head's sink logit, gpt-oss)
  h.{i}.attn.{q,q_a,q_b,kv_a,kv_b}.w  h.{i}.attn.{q_a,kv_a}_norm.g   (latent attention instead
                                                    of q, k, v: core/model/mla.py)
  h.{i}.attn.{q,k}_norm.g [d_head]                  (qk_norm; qk_norm_over "projection":
                                                    [n_head·d_head], [n_kv_head·d_head])
  h.{i}.post_attn_ln.g  h.{i}.post_mlp_ln.g       (norms of each branch's output: sandwich,
                                                    branch_out)
  h.{i}.mlp.fc.{w[,b]} [d_model, d_ff]  h.{i}.mlp.proj.{w[,b]} [d_ff, d_model]
  h.{i}.mlp.gate.{w[,b]}, h.{i}.mlp.up.{w[,b]} [d_model, d_ff] (gated_mlp: instead of fc)
  h.{i}.moe.router.w [d_model, n_expert]  h.{i}.moe.expert.{e}.{gate,up,proj}.w (an MoE layer
  instead of mlp.*: core/model/moe.py)  h.{i}.moe.shared.{gate,up,proj}.w  h.{i}.moe.shared_gate.w
  h.{i}.moe.router.b [n_expert] (router_bias)  h.{i}.moe.expert.{e}.{gate,up,proj}.b (mlp_bias)
  head.transform.{w,b}  head.ln.{g,b}  head.bias   (BERT's masked-LM head)
"""
from __future__ import annotations

from typing import Callable, Iterator, Mapping, Optional

import numpy as np

from . import ops
from .config import ModelConfig

F32 = np.float32


class ParamStore(Mapping[str, np.ndarray]):
    """A read-only mapping of checked float32 parameters. Subclasses implement __getitem__,
    __iter__, __len__ and shape(); rows() and row_blocks() may be made cheaper."""

    def shape(self, name: str) -> tuple[int, ...]:
        raise NotImplementedError

    def rows(self, name: str, index: np.ndarray) -> np.ndarray:
        # [n] row indices -> [n, ...] rows of a table
        return self[name][index]

    def row_blocks(self, name: str, block_rows: int = 8192) -> Iterator[tuple[int, np.ndarray]]:
        # (first row, [rows, ...]) for consecutive blocks of a table
        table = self[name]
        for start in range(0, table.shape[0], block_rows):
            yield start, table[start:start + block_rows]

    def check_unchanged(self) -> None:
        """Raise a ModelError if the files read from changed since they were opened (a read
        of a truncated memory map would end the process); a store in memory never changes."""

    def nbytes_widened(self) -> int:
        """Bytes of weights held in memory beyond the file mapping (widened or transposed)."""
        return 0


def rows(params: Mapping[str, np.ndarray], name: str, index: np.ndarray) -> np.ndarray:
    # [n] ids -> [n, d]: rows of a table. A parameter store that reads lazily gathers only
    # these rows (a 128k-row bf16 table is not widened for a 20-token text).
    gather = getattr(params, "rows", None)
    return gather(name, index) if gather is not None else params[name][index]


def linear(params: Mapping[str, np.ndarray], name: str, x: np.ndarray,
           b: Optional[np.ndarray]) -> np.ndarray:
    # [..., d_in] @ params[name] [d_in, d_out] (+ b) -> [..., d_out]: by a store that multiplies
    # from its stored form (a GGUF's quantized blocks: io/gguf/compact.py) where it can
    product = getattr(params, "product", None)
    y = product(name, x) if product is not None else None
    if y is None:
        return ops.linear(x, params[name], b)
    if b is not None:
        y += b
    return y


def columns(params: Mapping[str, np.ndarray], name: str, cols: slice) -> np.ndarray:
    # [d_in, d_out] weight -> [d_in, len(cols)], a copy: some of a weight's columns (a head's),
    # read without the whole matrix where the store can (a GGUF dequantizes only those rows)
    read = getattr(params, "columns", None)
    value = read(name, cols) if read is not None else None
    return np.array(params[name][:, cols]) if value is None else value


def times_rows_transposed(x: np.ndarray, params: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    # [n, d] @ table[n_rows, d].T -> [n, n_rows]: from the stored form where the store can,
    # else in row blocks where the store offers them
    product = getattr(params, "product_transposed", None)
    y = product(name, x) if product is not None else None
    if y is not None:
        return y
    blocks: Optional[Callable[[str], Iterator[tuple[int, np.ndarray]]]] = getattr(params, "row_blocks", None)
    if blocks is None:
        return x @ params[name].T
    out = np.empty((x.shape[0], params.shape(name)[0]), dtype=F32)
    for start, block in blocks(name):
        out[:, start:start + len(block)] = x @ block.T
    return out


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter the forward pass reads, with its shape (loaders check against it)."""
    d, f, dh = config.d_model, config.d_ff, config.d_head
    d_q, d_kv = config.n_head * dh, config.n_kv_heads * dh
    shapes: dict[str, tuple[int, ...]] = {"wte": (config.n_vocab, config.d_token)}
    if config.position == "learned":
        shapes["wpe"] = (config.position_offset + config.n_ctx, d)
    if config.n_token_types:
        shapes["wtt"] = (config.n_token_types, d)
    if config.embed_norm:
        shapes.update({"ln_emb.g": (d,), "ln_emb.b": (d,)})

    def linear(name: str, d_in: int, d_out: int, bias: bool) -> None:
        shapes[name + ".w"] = (d_in, d_out)
        if bias:
            shapes[name + ".b"] = (d_out,)

    def norm_shapes(name: str) -> None:
        shapes[name + ".g"] = (d,)
        if config.norm_kind == "layer":
            shapes[name + ".b"] = (d,)

    for i in range(config.n_layer):
        p = f"h.{i}."
        if config.is_mla:
            shapes.update(latent_attention_shapes(config, i))
        else:
            linear(p + "attn.q", d, d_q, config.qkv_bias)
            linear(p + "attn.k", d, d_kv, config.qkv_bias)
            linear(p + "attn.v", d, d_kv, config.qkv_bias)
            linear(p + "attn.o", d_q, d, config.o_bias)
        if config.attn_sinks:
            shapes[p + "attn.sinks"] = (config.n_head,)
        if config.qk_norm:
            whole = config.qk_norm_over == "projection"
            shapes.update({p + "attn.q_norm.g": (d_q if whole else dh,),
                           p + "attn.k_norm.g": (d_kv if whole else dh,)})
        if config.norms_branch_input or config.norm == "post":
            norm_shapes(p + "ln_1")
            norm_shapes(p + "ln_2")
        if config.norms_branch_output:
            norm_shapes(p + "post_attn_ln")
            norm_shapes(p + "post_mlp_ln")
        if config.is_moe_layer(i):
            shapes.update(moe_shapes(config, i))
            continue
        for name in (("gate", "up") if config.gated_mlp else ("fc",)):
            linear(p + "mlp." + name, d, f, config.mlp_bias)
        linear(p + "mlp.proj", f, d, config.mlp_bias)
    if config.final_norm:
        norm_shapes("ln_f")
    if config.lm_head and not config.tied_head:
        shapes["lm_head.w"] = (config.n_vocab, d)
    if config.lm_head_transform:
        shapes.update({"head.transform.w": (d, d), "head.transform.b": (d,),
                       "head.ln.g": (d,), "head.ln.b": (d,), "head.bias": (config.n_vocab,)})
    return shapes


def latent_attention_shapes(config: ModelConfig, layer: int) -> dict[str, tuple[int, ...]]:
    """A multi-head latent attention layer's weights (core/model/mla.py), without biases."""
    d, r, p = config.d_model, config.kv_lora_rank, f"h.{layer}.attn."
    d_q = config.n_head * config.d_head
    shapes = {p + "kv_a.w": (d, r + config.d_rotary), p + "kv_a_norm.g": (r,),
              p + "kv_b.w": (r, config.n_head * (config.d_head - config.d_rotary + config.d_v)),
              p + "o.w": (config.n_head * config.d_v, d)}
    if config.q_lora_rank:
        shapes.update({p + "q_a.w": (d, config.q_lora_rank), p + "q_a_norm.g": (config.q_lora_rank,),
                       p + "q_b.w": (config.q_lora_rank, d_q)})
    else:
        shapes[p + "q.w"] = (d, d_q)
    return shapes


def moe_shapes(config: ModelConfig, layer: int) -> dict[str, tuple[int, ...]]:
    """An MoE layer's router, experts and shared expert (core/model/moe.py), with the router's
    bias (router_bias) and the routed experts' biases (mlp_bias) where the model has them."""
    d, f = config.d_model, config.d_expert_ff
    p = f"h.{layer}.moe."
    shapes = {p + "router.w": (d, config.n_expert)}
    if config.router_bias:
        shapes[p + "router.b"] = (config.n_expert,)
    experts = [(f"expert.{e}.", f) for e in range(config.n_expert)]
    if config.d_shared_expert:
        experts.append(("shared.", config.d_shared_expert))
        if config.shared_expert_gate:
            shapes[p + "shared_gate.w"] = (d, 1)
    for name, width in experts:
        shapes.update({p + name + "gate.w": (d, width), p + name + "up.w": (d, width),
                       p + name + "proj.w": (width, d)})
        if config.mlp_bias and name.startswith("expert."):
            shapes.update({p + name + "gate.b": (width,), p + name + "up.b": (width,),
                           p + name + "proj.b": (d,)})
    return shapes
