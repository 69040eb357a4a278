"""How llama.cpp stores a family's models (GGUF). A family module that opens .gguf files declares
GGUF_LAYOUTS, a tuple of GGUFLayout beside its HF key map; io/gguf reads them through
families.gguf_layout_of and holds no per-architecture branch. A layout says

  architecture   the general.architecture value it opens
  experts        True: it opens the files of that architecture with {arch}.expert_count (a
                 mixture of experts; Mixtral is `llama` with experts)
  config         (files, arch) -> the config.json fields Hugging Face's GGUF loader derives
                 (model_type one of the family's MODEL_TYPES)
  top, block     GGUF name -> HF name: top-level tensors (token_embd ...) and a block's leaves
                 (attn_q ...); `layer` is the HF prefix of block N
  expert_names   a 3-D experts tensor's leaf (ffn_gate_exps ...) -> the HF name of expert {e}
                 inside a block: each expert is read as one slice of it (and its 2-D bias,
                 ffn_*_exps.bias [n_expert, out], one row: gpt-oss)
  fixes          how llama.cpp's converter changed a tensor, undone on read: leaf (weight and
                 bias) or leaf.weight / leaf.bias -> one of FIXES
  embedding      the HF name of the token embedding (its rows are checked against the vocabulary)
  separate_head  llama.cpp writes the LM head as its own output.weight where HF ties it (GPT-2)
  sentencepiece  the sentencepiece tokenizer's variant ("llama" or "gemma")

Nothing here reads a file by itself: `files` are io/gguf's opened GGUF files (value, integer,
number, tensors, get)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ...core.model.errors import ModelError

# the fix-ups io/gguf/model.py knows how to undo
FIXES = ("unpermute_heads",     # q rows: llama.cpp's interleaved rotary pairs -> HF's halves
         "unpermute_kv_heads",  # k rows, with the key/value heads' count
         "minus_one",           # an RMSNorm gain stored as 1 + w
         "transposed",          # a Conv1D weight stored [out, in]
         "as_row")              # a 1-D gain HF stores as [1, d] (when stored 1-D)


@dataclass(frozen=True)
class GGUFLayout:
    architecture: str
    config: Callable[[list, str], dict]
    top: dict
    block: dict
    layer: str                                  # "model.layers.{}." : the HF prefix of block N
    embedding: str
    experts: bool = False
    expert_names: dict = field(default_factory=dict)
    fixes: dict = field(default_factory=dict)
    separate_head: bool = False
    sentencepiece: str = "llama"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.fixes.values()) - set(FIXES))
        if unknown:
            raise TypeError(f"GGUF layout {self.architecture!r}: unknown fix-up {unknown[0]!r} "
                            f"(known: {', '.join(FIXES)})")

    def fix(self, leaf: str, kind: str):
        """The fix-up name of tensor leaf.kind (kind: weight or bias), or None."""
        return self.fixes.get(f"{leaf}.{kind}", self.fixes.get(leaf))


# -- the Llama layout's names, shared by its kin ---------------------------------------------
DECODER_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
DECODER_BLOCK = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
                 "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                 "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
                 "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
                 "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
                 # a mixture of experts' router and shared expert
                 "ffn_gate_inp": "mlp.gate", "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
                 "ffn_up_shexp": "mlp.shared_expert.up_proj",
                 "ffn_down_shexp": "mlp.shared_expert.down_proj",
                 "ffn_gate_inp_shexp": "mlp.shared_expert_gate"}
EXPERT_NAMES = {"ffn_gate_exps": "mlp.experts.{e}.gate_proj", "ffn_up_exps": "mlp.experts.{e}.up_proj",
                "ffn_down_exps": "mlp.experts.{e}.down_proj"}
# llama.cpp permutes q and k of the `llama` architecture for its rotary pairs
UNPERMUTE_QK = {"attn_q": "unpermute_heads", "attn_k": "unpermute_kv_heads"}


def decoder_layout(architecture: str, config: Callable[[list, str], dict], **changes) -> GGUFLayout:
    """A layout with the Llama layout's names; a family passes its differences."""
    layout = GGUFLayout(architecture, config, DECODER_TOP, DECODER_BLOCK, "model.layers.{}.",
                        "model.embed_tokens.weight", expert_names=EXPERT_NAMES)
    return replace(layout, **changes)


# -- metadata -> config.json -------------------------------------------------------------------
_LLAMA3_CANDIDATES = ((1.0, 4.0, 8192),)   # (low, high, original context) of Llama 3.1/3.2/3.3


def tensor_names(files: list) -> set:
    return {n for g in files for n in g.tensors}


def vocab_size(files: list, arch: str) -> int:
    tokens = files[0].value("tokenizer.ggml.tokens", required=True)
    return len(tokens) if isinstance(tokens, list) else files[0].integer(f"{arch}.vocab_size")


def _rope_scaling(f, arch: str) -> dict | None:
    kind = f.value(f"{arch}.rope.scaling.type", "none")
    if kind in ("none", None):
        return None
    if kind == "linear":
        return {"type": "linear", "factor": f.number(f"{arch}.rope.scaling.factor")}
    if kind == "yarn":      # llama.cpp's yarn keys; its defaults for the betas (32, 1)
        return {"rope_type": "yarn", "factor": f.number(f"{arch}.rope.scaling.factor"),
                "original_max_position_embeddings": f.integer(f"{arch}.rope.scaling.original_context_length"),
                "beta_fast": f.number(f"{arch}.rope.scaling.yarn_beta_fast", 32.0),
                "beta_slow": f.number(f"{arch}.rope.scaling.yarn_beta_slow", 1.0)}
    raise ModelError(f"{f.path}: rope scaling {kind!r} is not supported (linear and yarn are)")


def _llama3_from_rope_freqs(f, factors: np.ndarray, d_head: int, theta: float) -> dict:
    """llama.cpp stores Llama 3's rope scaling as per-frequency factors (rope_freqs.weight);
    recover the config it came from, or refuse when no known setting gives these factors."""
    freqs = 1.0 / (theta ** (np.arange(0, d_head, 2, dtype=np.float32) / d_head))
    factor = float(factors.max())
    for low, high, original in _LLAMA3_CANDIDATES:
        wavelen = 2 * math.pi / freqs
        smooth = (original / wavelen - low) / (high - low)
        expected = np.where(wavelen < original / high, 1.0,
                            np.where(wavelen > original / low, factor, 1 / ((1 - smooth) / factor + smooth)))
        if np.allclose(expected, factors, rtol=1e-5, atol=1e-6):
            return {"rope_type": "llama3", "factor": factor, "low_freq_factor": low,
                    "high_freq_factor": high, "original_max_position_embeddings": original}
    raise ModelError(f"{f.path}: rope_freqs.weight holds rope factors no known Llama 3 setting "
                     f"gives; not supported")


def decoder_config(files: list, arch: str, head_dim: bool = False) -> dict:
    """The Llama layout's config.json fields (model_type = the GGUF architecture); head_dim is
    written when it is not d_model / n_head, or always with head_dim=True."""
    f = files[0]
    names = tensor_names(files)
    n_head = f.integer(f"{arch}.attention.head_count")
    d_model = f.integer(f"{arch}.embedding_length")
    cfg = {"model_type": arch, "vocab_size": vocab_size(files, arch), "hidden_size": d_model,
           "num_hidden_layers": f.integer(f"{arch}.block_count"),
           "intermediate_size": f.integer(f"{arch}.feed_forward_length"),
           "num_attention_heads": n_head,
           "num_key_value_heads": f.integer(f"{arch}.attention.head_count_kv", n_head),
           "rms_norm_eps": f.number(f"{arch}.attention.layer_norm_rms_epsilon"),
           "max_position_embeddings": f.integer(f"{arch}.context_length", 2048),
           "rope_theta": f.number(f"{arch}.rope.freq_base", 10000.0),
           "tie_word_embeddings": "output.weight" not in names}
    d_head = f.integer(f"{arch}.attention.key_length", d_model // n_head)
    if d_head * n_head != d_model or head_dim:
        cfg["head_dim"] = d_head
    scaling = _rope_scaling(f, arch)
    if "rope_freqs.weight" in names:
        owner = next(g for g in files if "rope_freqs.weight" in g.tensors)
        scaling = _llama3_from_rope_freqs(f, owner.get("rope_freqs.weight"), d_head, cfg["rope_theta"])
    if scaling is not None:
        cfg["rope_scaling"] = scaling
    return cfg


def expert_config(files: list, arch: str, model_type: str, count_key: str, norm_topk: bool) -> dict:
    """The mixture-of-experts fields every MoE family reads from llama.cpp's {arch}.expert_*
    keys. norm_topk: whether llama.cpp divides the top-k gates by their sum (its build_moe_ffn
    norm_w) when the file has no {arch}.expert_weights_norm, as the released models' Hugging
    Face configs say."""
    f = files[0]
    return {"model_type": model_type, count_key: f.integer(f"{arch}.expert_count"),
            "num_experts_per_tok": f.integer(f"{arch}.expert_used_count"),
            "norm_topk_prob": bool(f.value(f"{arch}.expert_weights_norm", norm_topk))}


def qwen_expert_config(files: list, arch: str, n_layer: int) -> dict:
    """Qwen-MoE's expert width and its dense layers: a layer stored with a dense ffn_gate instead
    of ffn_gate_exps is a dense layer."""
    names = tensor_names(files)
    return {"moe_intermediate_size": files[0].integer(f"{arch}.expert_feed_forward_length"),
            "mlp_only_layers": [i for i in range(n_layer) if f"blk.{i}.ffn_gate_exps.weight" not in names],
            "decoder_sparse_step": 1}
