"""Open a .gguf as a Model: llama.cpp's metadata -> the config.json fields Hugging Face's GGUF
loader derives, then the same family config, key map and lazy parameter store as an HF folder."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np

from ...core.model.errors import ModelError
from ...core.model.params import expected_shapes
from ...core.trace.model import Model
from .. import families
from ..checkpoint_params import CheckpointParams
from .compact import CompactWeight, compact_weight
from .file import GGUFFile
from .model import MOE_ARCHITECTURES, GGUFCheckpoint, architecture, map_tensors, open_files
from .tokenizer import tokenizer_from_gguf
from .weights import weight_steps
from ..keymaps import IDENTITY

_LLAMA3_CANDIDATES = ((1.0, 4.0, 8192),)   # (low, high, original context) of Llama 3.1/3.2/3.3


def _rope_scaling(f: GGUFFile, arch: str, d_head: int, theta: float) -> dict | None:
    kind = f.value(f"{arch}.rope.scaling.type", "none")
    if kind in ("none", None):
        return None
    if kind == "linear":
        return {"type": "linear", "factor": f.number(f"{arch}.rope.scaling.factor")}
    raise ModelError(f"{f.path}: rope scaling {kind!r} is not supported (linear is)")


def _llama3_from_rope_freqs(f: GGUFFile, factors: np.ndarray, d_head: int, theta: float) -> dict:
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


def hf_config(files: list[GGUFFile], arch: str) -> dict:
    """The config.json fields of this GGUF (model_type = the GGUF architecture)."""
    f = files[0]
    tokens = f.value("tokenizer.ggml.tokens", required=True)
    n_vocab = len(tokens) if isinstance(tokens, list) else f.integer(f"{arch}.vocab_size")
    tensor_names = {n for g in files for n in g.tensors}
    n_head = f.integer(f"{arch}.attention.head_count")
    d_model = f.integer(f"{arch}.embedding_length")
    if arch == "gpt2":
        return {"model_type": "gpt2", "vocab_size": n_vocab, "n_embd": d_model,
                "n_layer": f.integer(f"{arch}.block_count"), "n_head": n_head,
                "n_positions": f.integer(f"{arch}.context_length"),
                "n_inner": f.integer(f"{arch}.feed_forward_length"),
                "layer_norm_epsilon": f.number(f"{arch}.attention.layer_norm_epsilon"),
                "activation_function": "gelu_new", "tie_word_embeddings": True}
    cfg = {"model_type": arch, "vocab_size": n_vocab, "hidden_size": d_model,
           "num_hidden_layers": f.integer(f"{arch}.block_count"),
           "intermediate_size": f.integer(f"{arch}.feed_forward_length"),
           "num_attention_heads": n_head,
           "num_key_value_heads": f.integer(f"{arch}.attention.head_count_kv", n_head),
           "rms_norm_eps": f.number(f"{arch}.attention.layer_norm_rms_epsilon"),
           "max_position_embeddings": f.integer(f"{arch}.context_length", 2048),
           "rope_theta": f.number(f"{arch}.rope.freq_base", 10000.0),
           "tie_word_embeddings": "output.weight" not in tensor_names}
    d_head = f.integer(f"{arch}.attention.key_length", d_model // n_head)
    if d_head * n_head != d_model or arch in ("gemma", "qwen3", "qwen3moe"):
        cfg["head_dim"] = d_head
    if arch == "llama":
        cfg["attention_bias"] = "blk.0.attn_q.bias" in tensor_names
    if arch == "gemma":
        cfg["hidden_activation"] = "gelu_pytorch_tanh"
    scaling = _rope_scaling(f, arch, d_head, cfg["rope_theta"])
    if "rope_freqs.weight" in tensor_names:
        owner = next(g for g in files if "rope_freqs.weight" in g.tensors)
        scaling = _llama3_from_rope_freqs(f, owner.get("rope_freqs.weight"), d_head, cfg["rope_theta"])
    if scaling is not None:
        cfg["rope_scaling"] = scaling
    if f.value(f"{arch}.expert_count", 0):
        cfg.update(_expert_config(f, arch, tensor_names, cfg["num_hidden_layers"]))
    return cfg


# whether llama.cpp divides the top-k gates by their sum (its build_moe_ffn norm_w) when the file
# has no {arch}.expert_weights_norm: as the Hugging Face configs of the released models say
_NORM_TOPK = {"qwen3moe": True, "qwen2moe": False, "olmoe": False, "llama": True}


def _expert_config(f: GGUFFile, arch: str, tensor_names: set, n_layer: int) -> dict:
    """The mixture-of-experts fields of config.json from llama.cpp's {arch}.expert_* keys; a
    layer stored with a dense ffn_gate instead of ffn_gate_exps is a dense layer."""
    model_type = MOE_ARCHITECTURES[arch]
    count_key = "num_local_experts" if model_type == "mixtral" else "num_experts"
    cfg = {"model_type": model_type, count_key: f.integer(f"{arch}.expert_count"),
           "num_experts_per_tok": f.integer(f"{arch}.expert_used_count"),
           "norm_topk_prob": bool(f.value(f"{arch}.expert_weights_norm", _NORM_TOPK[arch]))}
    if model_type == "olmoe":            # an expert is intermediate_size wide
        cfg["intermediate_size"] = f.integer(f"{arch}.expert_feed_forward_length",
                                             f.integer(f"{arch}.feed_forward_length"))
        cfg["clip_qkv"] = None
    elif model_type in ("qwen3_moe", "qwen2_moe"):
        cfg["moe_intermediate_size"] = f.integer(f"{arch}.expert_feed_forward_length")
        cfg["mlp_only_layers"] = [i for i in range(n_layer) if f"blk.{i}.ffn_gate_exps.weight" not in tensor_names]
        cfg["decoder_sparse_step"] = 1
    if model_type == "qwen2_moe":
        cfg["shared_expert_intermediate_size"] = f.integer(f"{arch}.expert_shared_feed_forward_length")
        cfg["qkv_bias"] = "blk.0.attn_q.bias" in tensor_names
    return cfg


def _check_vocab(files: list[GGUFFile], ckpt: GGUFCheckpoint, embed: str, n_vocab: int) -> None:
    if embed not in ckpt.where:
        raise ModelError(f"{files[0].path}: no token_embd.weight tensor (a GGUF of a language model "
                         f"has one)")
    rows = ckpt.shape(embed)[0]
    if rows != n_vocab:
        raise ModelError(f"{ckpt.file_of(embed)}: the vocabulary has {n_vocab} tokens but "
                         f"token_embd.weight has {rows} rows")


class GGUFParams(CheckpointParams):
    """A GGUF model's parameters: they also say how a weight's stored block gives it (the
    provenance of a weight, core/analysis/provenance/params.py), and the forward pass multiplies by
    its matrices straight from the stored blocks (io/gguf/compact.py): the float32 matrices
    of an 8B model (32 GB) are never made, and nothing is dequantized again for each pass."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._compact: dict[tuple[str, bool], Optional[CompactWeight]] = {}

    def weight_steps(self, name: str, index):
        return weight_steps(self, name, index)

    def compact(self, name: str, table: bool = False) -> Optional[CompactWeight]:
        key = (name, table)
        if key not in self._compact:
            ckpt_name, transform = self.entries[name]
            self._compact[key] = compact_weight(self.ckpt, ckpt_name, transform, self.shapes[name], table)
        return self._compact[key]

    def product(self, name: str, x: np.ndarray, table: bool = False) -> Optional[np.ndarray]:
        """x @ self[name] (a weight [d_in, d_out]) from the stored blocks; None if not compact."""
        weight = self.compact(name, table)
        if weight is None:
            return None
        self.ckpt.check_unchanged(self.entries[name][0])
        return weight.times_transposed(x)

    def columns(self, name: str, cols: slice) -> Optional[np.ndarray]:
        """self[name][:, cols] of a weight [d_in, d_out], dequantizing only the stored rows that
        hold those columns (the QKV view's head, on the GUI thread); None if not compact."""
        weight = self.compact(name)
        if weight is None:
            return None
        self.ckpt.check_unchanged(self.entries[name][0])
        return weight.columns(cols)

    def product_transposed(self, name: str, x: np.ndarray) -> Optional[np.ndarray]:
        """x @ self[name].T (a table [n_rows, d]: the output head) from the stored blocks."""
        return self.product(name, x, table=True)


def _params(ckpt: GGUFCheckpoint, config, arch: str) -> CheckpointParams:
    keymap = list(families.of_config(config).keymap(config, ckpt.names()))
    if arch == "gpt2" and config.lm_head and not config.tied_head:
        keymap.append(("lm_head.w", "lm_head.weight", IDENTITY))
    shapes = expected_shapes(config)
    entries = {}
    for core_name, full, transform in keymap:
        if full not in ckpt.where:
            raise ModelError(f"{ckpt.source}: missing tensor for {full} (GGUF name expected "
                             f"like blk.N.* / token_embd / output_norm)")
        expected = transform.checkpoint_shape(shapes[core_name])
        actual = ckpt.shape(full)
        if actual != expected:
            raise ModelError(f"{ckpt.file_of(full)}: tensor {ckpt.stored_name(full)} has shape "
                             f"{actual}, expected {expected}")
        ckpt.check_readable(full)
        entries[core_name] = (full, transform)
    return GGUFParams(ckpt, entries, {name: shapes[name] for name in entries})


def load_gguf(path: Path) -> Model:
    files = open_files(path)
    arch = architecture(files[0])
    cfg = hf_config(files, arch)
    n_kv = cfg.get("num_key_value_heads", cfg.get("n_head"))
    n_head = cfg.get("num_attention_heads", cfg.get("n_head"))
    ckpt = GGUFCheckpoint(files, map_tensors(files, arch, n_head, n_kv, mixtral=cfg["model_type"] == "mixtral"),
                          str(path))
    _check_vocab(files, ckpt, "wte.weight" if arch == "gpt2" else "model.embed_tokens.weight",
                 cfg["vocab_size"])
    warnings: list[str] = []
    config = families.by_model_type(cfg["model_type"], str(path)).config_from_hf(cfg, str(path), ckpt.names(),
                                                                               warnings)
    if arch == "gpt2":  # llama.cpp writes GPT-2's head as its own output.weight (quantized apart)
        warnings.clear()
        config = config.replace(lm_head=True, tied_head="lm_head.weight" not in ckpt.where)
    name = files[0].value("general.name") or path.name.split(".gguf")[0]
    config = config.replace(name=str(name))
    params = _params(ckpt, config, arch)
    tokenizer = tokenizer_from_gguf(files[0], arch)
    model = Model(config, params, tokenizer, source=str(path))
    model.warnings = warnings
    return model
