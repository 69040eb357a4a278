"""Synthetic models for tests: tiny random checkpoints with the real Hugging Face key
spellings, written as safetensors (our own writer, so bf16 and broken files are possible),
sharded folders, the project's .npz, and small tokenizers made with `tokenizers`.

    from tests.builders import bert_folder, gpt2_folder, tiny_config, random_params, ...

No torch, no transformers: everything here is numpy + tokenizers."""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Mapping, Optional

import numpy as np
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors

from transformer_stepper.core.model.config import ModelConfig
from transformer_stepper.core.model.params import expected_shapes
from transformer_stepper.core.model.tokenize import Tokenizer
from transformer_stepper.io import npz_format

# ------------------------------------------------------------------------------ tokenizers
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
BERT_WORDS = ["the", "bank", "river", "money", "of", "a", "he", "she", "it", "sat", "by", "on",
              "was", "went", "to", "and", "cafe", "##s", "##ing", "##ed"]
_LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
_PUNCT = list(".,!?'\"-:;()") + [str(d) for d in range(10)]


def wordpiece_vocab() -> dict[str, int]:
    pieces = BERT_SPECIALS + BERT_WORDS + _LETTERS + _PUNCT + ["##" + c for c in _LETTERS]
    vocab: dict[str, int] = {}
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    return vocab


def wordpiece_tokenizer() -> HFTokenizer:
    """A BERT-style uncased WordPiece tokenizer: [CLS] ... [SEP], offsets, [UNK] for the rest."""
    vocab = wordpiece_vocab()
    tok = HFTokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.decoder = decoders.WordPiece()
    return tok


def bytelevel_tokenizer() -> HFTokenizer:
    """A GPT-2-style byte-level BPE: all 256 byte symbols, a few merges, <|endoftext|>."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: i for i, symbol in enumerate(alphabet)}
    merges = [("t", "h"), ("th", "e"), ("Ġ", "the"), ("Ġ", "b"), ("a", "n"), ("an", "k")]
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    tok = HFTokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens(["<|endoftext|>"])
    return tok


def vocab_size(tok: HFTokenizer) -> int:
    return tok.get_vocab_size(with_added_tokens=True)


def wrap(tok: HFTokenizer, source: str = "test tokenizer") -> Tokenizer:
    return Tokenizer(tok, source)


# ------------------------------------------------------------------------------ safetensors
_NUMPY_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
                 "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounding to nearest even, as torch does."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_round(a: np.ndarray) -> np.ndarray:
    """What a float32 array reads back as after a trip through bfloat16."""
    return (bf16_bits(a).astype(np.uint32) << 16).view(np.float32)


def _encode(value: np.ndarray, dtype: str) -> bytes:
    if dtype == "BF16":
        return bf16_bits(value).tobytes()
    return np.ascontiguousarray(value, dtype=_NUMPY_DTYPES[dtype]).tobytes()


def _default_dtype(value: np.ndarray, float_dtype: str) -> str:
    if value.dtype.kind == "f":
        return float_dtype
    return {"i": {8: "I64", 4: "I32", 2: "I16", 1: "I8"}[value.dtype.itemsize],
            "u": "U8", "b": "BOOL"}[value.dtype.kind]


def write_raw_safetensors(path: Path, header: Mapping, data: bytes, pad_to: int = 8) -> Path:
    """Any header (even a nonsensical one) followed by `data`."""
    header_bytes = json.dumps(header).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % pad_to)
    Path(path).write_bytes(struct.pack("<Q", len(header_bytes)) + header_bytes + data)
    return Path(path)


def write_safetensors(path: Path, tensors: Mapping[str, np.ndarray], dtype: str = "F32",
                      dtypes: Optional[Mapping[str, str]] = None,
                      metadata: Optional[Mapping[str, str]] = None) -> Path:
    """Float tensors stored as `dtype` (F32, F16, BF16), each overridable in `dtypes`;
    integer and bool tensors keep their own type. Data in name order, like safetensors."""
    header: dict = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    chunks, offset = [], 0
    for name in sorted(tensors):
        value = np.asarray(tensors[name])
        kind = (dtypes or {}).get(name) or _default_dtype(value, dtype)
        raw = _encode(value, kind)
        header[name] = {"dtype": kind, "shape": list(value.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    return write_raw_safetensors(path, header, b"".join(chunks))


def write_sharded(folder: Path, tensors: Mapping[str, np.ndarray], n_shards: int = 2,
                  dtype: str = "F32") -> Path:
    """model-0000i-of-0000n.safetensors + model.safetensors.index.json, as save_pretrained does."""
    names = sorted(tensors)
    weight_map, total = {}, 0
    for i in range(n_shards):
        shard = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {name: tensors[name] for name in names[i::n_shards]}
        write_safetensors(folder / shard, part, dtype=dtype, metadata={"format": "pt"})
        weight_map.update({name: shard for name in part})
        total += sum(np.asarray(v).nbytes for v in part.values())
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return index


# ------------------------------------------------------------------------------ HF checkpoints
def _normal(rng: np.random.Generator, *shape: int, scale: float = 0.2) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _ln(rng, d: int) -> tuple[np.ndarray, np.ndarray]:
    return (1 + _normal(rng, d, scale=0.1)), _normal(rng, d, scale=0.1)


def bert_config_json(n_vocab: int, d_model: int = 32, n_head: int = 4, n_layer: int = 2,
                     d_ff: int = 64, n_ctx: int = 16, n_types: int = 2, **overrides) -> dict:
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": n_vocab,
           "hidden_size": d_model, "num_hidden_layers": n_layer, "num_attention_heads": n_head,
           "intermediate_size": d_ff, "hidden_act": "gelu", "max_position_embeddings": n_ctx,
           "type_vocab_size": n_types, "layer_norm_eps": 1e-12, "position_embedding_type": "absolute",
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "pad_token_id": 0,
           "initializer_range": 0.02, "torch_dtype": "float32"}
    cfg.update(overrides)
    return cfg


def bert_checkpoint(n_vocab: int, d_model: int = 32, n_layer: int = 2, d_ff: int = 64,
                    n_ctx: int = 16, n_types: int = 2, prefix: str = "", ln: str = "weight",
                    mlm_head: bool = False, pooler: bool = True, position_ids: bool = True,
                    seed: int = 0) -> dict[str, np.ndarray]:
    """BertModel (prefix "") or BertFor* (prefix "bert.") tensors, nn.Linear layout [out, in].
    ln="gamma" gives the old TF-ported LayerNorm.gamma/beta names."""
    rng = np.random.default_rng(seed)
    g, b = ("weight", "bias") if ln == "weight" else ("gamma", "beta")
    t: dict[str, np.ndarray] = {}
    e = prefix + "embeddings."
    t[e + "word_embeddings.weight"] = _normal(rng, n_vocab, d_model, scale=1.0)
    t[e + "position_embeddings.weight"] = _normal(rng, n_ctx, d_model, scale=0.5)
    t[e + "token_type_embeddings.weight"] = _normal(rng, n_types, d_model, scale=0.5)
    t[e + f"LayerNorm.{g}"], t[e + f"LayerNorm.{b}"] = _ln(rng, d_model)
    if position_ids:  # a buffer older transformers saved: int64, never a weight
        t[e + "position_ids"] = np.arange(n_ctx, dtype=np.int64)[None]
    for i in range(n_layer):
        p = f"{prefix}encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):
            t[p + name + ".weight"] = _normal(rng, d_model, d_model)
            t[p + name + ".bias"] = _normal(rng, d_model, scale=0.05)
        t[p + "intermediate.dense.weight"] = _normal(rng, d_ff, d_model)
        t[p + "intermediate.dense.bias"] = _normal(rng, d_ff, scale=0.05)
        t[p + "output.dense.weight"] = _normal(rng, d_model, d_ff)
        t[p + "output.dense.bias"] = _normal(rng, d_model, scale=0.05)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + f"{name}.{g}"], t[p + f"{name}.{b}"] = _ln(rng, d_model)
    if pooler:
        t[prefix + "pooler.dense.weight"] = _normal(rng, d_model, d_model)
        t[prefix + "pooler.dense.bias"] = _normal(rng, d_model, scale=0.05)
    if mlm_head:
        t["cls.predictions.bias"] = _normal(rng, n_vocab, scale=0.05)
        t["cls.predictions.transform.dense.weight"] = _normal(rng, d_model, d_model)
        t["cls.predictions.transform.dense.bias"] = _normal(rng, d_model, scale=0.05)
        t[f"cls.predictions.transform.LayerNorm.{g}"], t[f"cls.predictions.transform.LayerNorm.{b}"] = _ln(rng, d_model)
        t["cls.predictions.decoder.weight"] = t[e + "word_embeddings.weight"]  # tied
        t["cls.predictions.decoder.bias"] = t["cls.predictions.bias"]
    return t


def gpt2_config_json(n_vocab: int, d_model: int = 32, n_head: int = 4, n_layer: int = 2,
                     n_ctx: int = 16, **overrides) -> dict:
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": n_vocab,
           "n_embd": d_model, "n_head": n_head, "n_layer": n_layer, "n_positions": n_ctx,
           "n_ctx": n_ctx, "n_inner": None, "activation_function": "gelu_new",
           "layer_norm_epsilon": 1e-5, "scale_attn_weights": True, "resid_pdrop": 0.1,
           "embd_pdrop": 0.1, "attn_pdrop": 0.1, "bos_token_id": n_vocab - 1,
           "eos_token_id": n_vocab - 1}
    cfg.update(overrides)
    return cfg


def gpt2_checkpoint(n_vocab: int, d_model: int = 32, n_layer: int = 2, n_ctx: int = 16,
                    d_ff: Optional[int] = None, prefix: str = "", buffers: bool = True,
                    lm_head: bool = False, seed: int = 0) -> dict[str, np.ndarray]:
    """GPT2Model (prefix "") or GPT2LMHeadModel (prefix "transformer.") tensors; Conv1D
    layout [in, out]; `.attn.bias` / `.attn.masked_bias` buffers as older checkpoints hold."""
    rng = np.random.default_rng(seed)
    d_ff = d_ff or 4 * d_model
    t: dict[str, np.ndarray] = {}
    t[prefix + "wte.weight"] = _normal(rng, n_vocab, d_model, scale=1.0)
    t[prefix + "wpe.weight"] = _normal(rng, n_ctx, d_model, scale=0.5)
    for i in range(n_layer):
        p = f"{prefix}h.{i}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = _ln(rng, d_model)
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = _ln(rng, d_model)
        t[p + "attn.c_attn.weight"] = _normal(rng, d_model, 3 * d_model)
        t[p + "attn.c_attn.bias"] = _normal(rng, 3 * d_model, scale=0.05)
        t[p + "attn.c_proj.weight"] = _normal(rng, d_model, d_model)
        t[p + "attn.c_proj.bias"] = _normal(rng, d_model, scale=0.05)
        t[p + "mlp.c_fc.weight"] = _normal(rng, d_model, d_ff)
        t[p + "mlp.c_fc.bias"] = _normal(rng, d_ff, scale=0.05)
        t[p + "mlp.c_proj.weight"] = _normal(rng, d_ff, d_model)
        t[p + "mlp.c_proj.bias"] = _normal(rng, d_model, scale=0.05)
        if buffers:
            t[p + "attn.bias"] = np.tril(np.ones((n_ctx, n_ctx), dtype=np.float32))[None, None]
            t[p + "attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    t[prefix + "ln_f.weight"], t[prefix + "ln_f.bias"] = _ln(rng, d_model)
    if lm_head:
        t["lm_head.weight"] = t[prefix + "wte.weight"]  # tied
    return t


def llama_config_json(n_vocab: int, d_model: int = 32, n_head: int = 4, n_kv: int = 2,
                      n_layer: int = 2, d_ff: int = 48, model_type: str = "llama", **overrides) -> dict:
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": model_type, "vocab_size": n_vocab,
           "hidden_size": d_model, "num_attention_heads": n_head, "num_key_value_heads": n_kv,
           "num_hidden_layers": n_layer, "intermediate_size": d_ff, "hidden_act": "silu",
           "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "rope_scaling": None, "attention_bias": False, "mlp_bias": False,
           "tie_word_embeddings": False, "torch_dtype": "float32"}
    cfg.update(overrides)
    return cfg


def llama_checkpoint(n_vocab: int, d_model: int = 32, n_head: int = 4, n_kv: int = 2,
                     n_layer: int = 2, d_ff: int = 48, head_dim: Optional[int] = None,
                     lm_head: bool = True, qkv_bias: bool = False, qk_norm: bool = False,
                     seed: int = 0) -> dict[str, np.ndarray]:
    """LlamaForCausalLM tensors (model. prefix, nn.Linear [out, in], untied lm_head)."""
    rng = np.random.default_rng(seed)
    dh = head_dim or d_model // n_head
    t: dict[str, np.ndarray] = {"model.embed_tokens.weight": _normal(rng, n_vocab, d_model, scale=1.0)}
    for i in range(n_layer):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = 1 + _normal(rng, d_model, scale=0.1)
        t[p + "post_attention_layernorm.weight"] = 1 + _normal(rng, d_model, scale=0.1)
        for name, rows in (("q", n_head * dh), ("k", n_kv * dh), ("v", n_kv * dh)):
            t[p + f"self_attn.{name}_proj.weight"] = _normal(rng, rows, d_model)
            if qkv_bias:
                t[p + f"self_attn.{name}_proj.bias"] = _normal(rng, rows, scale=0.05)
        t[p + "self_attn.o_proj.weight"] = _normal(rng, d_model, n_head * dh)
        if qk_norm:
            t[p + "self_attn.q_norm.weight"] = 1 + _normal(rng, dh, scale=0.1)
            t[p + "self_attn.k_norm.weight"] = 1 + _normal(rng, dh, scale=0.1)
        t[p + "mlp.gate_proj.weight"] = _normal(rng, d_ff, d_model)
        t[p + "mlp.up_proj.weight"] = _normal(rng, d_ff, d_model)
        t[p + "mlp.down_proj.weight"] = _normal(rng, d_model, d_ff)
    t["model.norm.weight"] = 1 + _normal(rng, d_model, scale=0.1)
    if lm_head:
        t["lm_head.weight"] = _normal(rng, n_vocab, d_model)
    return t


def llama_folder(folder: Path, dtype: str = "F32", shards: int = 0, seed: int = 0,
                 config_overrides: Optional[dict] = None, **sizes) -> Path:
    tok = bytelevel_tokenizer()
    n_vocab = sizes.pop("n_vocab", vocab_size(tok))
    tensors = llama_checkpoint(n_vocab, seed=seed, **sizes)
    sizes.pop("lm_head", None), sizes.pop("qkv_bias", None), sizes.pop("qk_norm", None)
    head_dim = sizes.pop("head_dim", None)
    config = llama_config_json(n_vocab, **sizes, **({"head_dim": head_dim} if head_dim else {}),
                               **(config_overrides or {}))
    return write_folder(folder, tensors, config, tok, dtype=dtype, shards=shards)


# ------------------------------------------------------------------------------ HF folders
def write_folder(folder: Path, tensors: Mapping[str, np.ndarray], config: Optional[dict],
                 tokenizer: Optional[HFTokenizer], dtype: str = "F32", shards: int = 0,
                 dtypes: Optional[Mapping[str, str]] = None) -> Path:
    """config.json + model.safetensors (or `shards` shards and an index) + tokenizer.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config, indent=2))
    if shards:
        write_sharded(folder, tensors, n_shards=shards, dtype=dtype)
    else:
        write_safetensors(folder / "model.safetensors", tensors, dtype=dtype, dtypes=dtypes,
                          metadata={"format": "pt"})
    if tokenizer is not None:
        tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def bert_folder(folder: Path, prefix: str = "", ln: str = "weight", mlm_head: bool = False,
                dtype: str = "F32", shards: int = 0, seed: int = 0, config_overrides: Optional[dict] = None,
                **sizes) -> Path:
    tok = wordpiece_tokenizer()
    n_vocab = sizes.pop("n_vocab", vocab_size(tok))
    n_head = sizes.pop("n_head", 4)
    tensors = bert_checkpoint(n_vocab, prefix=prefix, ln=ln, mlm_head=mlm_head, seed=seed, **sizes)
    config = bert_config_json(n_vocab, n_head=n_head, **sizes, **(config_overrides or {}))
    if mlm_head:
        config["architectures"] = ["BertForMaskedLM"]
    return write_folder(folder, tensors, config, tok, dtype=dtype, shards=shards)


def gpt2_folder(folder: Path, prefix: str = "transformer.", dtype: str = "F32", shards: int = 0,
                buffers: bool = True, seed: int = 0, config_overrides: Optional[dict] = None,
                **sizes) -> Path:
    tok = bytelevel_tokenizer()
    n_vocab = sizes.pop("n_vocab", vocab_size(tok))
    n_head = sizes.pop("n_head", 4)
    tensors = gpt2_checkpoint(n_vocab, prefix=prefix, buffers=buffers, seed=seed, **sizes)
    config = gpt2_config_json(n_vocab, n_head=n_head, **sizes, **(config_overrides or {}))
    return write_folder(folder, tensors, config, tok, dtype=dtype, shards=shards)


# ------------------------------------------------------------------------------ core configs
def tiny_config(kind: str, **changes) -> ModelConfig:
    """Tiny random-model configs: "bert" (post-LN, token types, MLM head), "gpt2" (pre-LN,
    causal, ln_f, tied head), "sinusoidal" (fixed sinusoid positions, relu)."""
    if kind == "bert":
        config = ModelConfig(family="bert", n_vocab=len(wordpiece_vocab()), n_ctx=16, d_model=32,
                             n_head=4, n_layer=2, d_ff=64, position="learned", norm="post",
                             embed_norm=True, n_token_types=2, causal=False, activation="gelu_erf",
                             ln_eps=1e-12, lm_head=True, lm_head_transform=True)
    elif kind == "gpt2":
        config = ModelConfig(family="gpt2", n_vocab=vocab_size(bytelevel_tokenizer()), n_ctx=24,
                             d_model=32, n_head=4, n_layer=2, d_ff=128, position="learned",
                             norm="pre", causal=True, activation="gelu_tanh", ln_eps=1e-5,
                             final_norm=True, lm_head=True)
    elif kind == "sinusoidal":
        config = ModelConfig(family="stepper", n_vocab=len(wordpiece_vocab()), n_ctx=64, d_model=24,
                             n_head=3, n_layer=3, d_ff=48, position="sinusoidal", norm="post",
                             embed_norm=False, causal=False, activation="relu", ln_eps=1e-5,
                             lm_head=True)
    elif kind == "llama":   # rotary, RMSNorm, SwiGLU, 2 query heads per K/V head, untied head
        config = ModelConfig(family="llama", n_vocab=vocab_size(bytelevel_tokenizer()), n_ctx=64,
                             d_model=32, n_head=4, n_kv_head=2, n_layer=2, d_ff=48,
                             position="rotary", norm="pre", norm_kind="rms", causal=True,
                             activation="silu", gated_mlp=True, ln_eps=1e-6, final_norm=True,
                             lm_head=True, tied_head=False, qkv_bias=False, o_bias=False,
                             mlp_bias=False)
    else:
        raise ValueError(kind)
    return config.replace(**changes) if changes else config


def tokenizer_for(kind: str) -> HFTokenizer:
    return bytelevel_tokenizer() if kind in ("gpt2", "llama") else wordpiece_tokenizer()


def random_params(config: ModelConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Every parameter the forward pass reads, random, float32; LayerNorm gains near 1."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in expected_shapes(config).items():
        if name.endswith(".g"):
            params[name] = 1 + _normal(rng, *shape, scale=0.1)
        elif name in ("wte", "wpe", "wtt"):
            params[name] = _normal(rng, *shape, scale=1.0)
        else:
            params[name] = _normal(rng, *shape, scale=0.2)
    return params


def write_npz_model(path: Path, config: ModelConfig, params: Mapping[str, np.ndarray],
                    tokenizer: Optional[HFTokenizer] = None, **extra: np.ndarray) -> Path:
    """The project's .npz (tokenizer embedded when given); `extra` adds raw members."""
    npz_format.write(path, config, params, tokenizer.to_str() if tokenizer is not None else None)
    if extra:
        with np.load(path, allow_pickle=False) as archive:
            members = {name: archive[name] for name in archive.files}
        members.update(extra)
        np.savez(path, **members)
    return Path(path)


# ------------------------------------------------------------------------------ assertions
def model_error(fn, *args, **kwargs) -> str:
    """Call fn, expect a ModelError, check its message is one line; -> the message."""
    from transformer_stepper.core.model.errors import ModelError

    try:
        fn(*args, **kwargs)
    except ModelError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"{getattr(fn, '__name__', fn)} raised no ModelError")
    assert message and "\n" not in message and message == message.strip(), repr(message)
    return message


# ------------------------------------------------------------------------------ assertions
def assert_same_trace(a, b) -> None:
    """Two traces with the same tokens and bit-identical arrays."""
    assert a.tokens == b.tokens
    for name in a.names():
        assert a[name].tobytes() == b[name].tobytes(), name


def assert_close_trace(a, b, atol: float = 1e-5) -> None:
    """Two traces with the same tokens and arrays equal to float32 rounding: for the same
    weights held in different memory (a memory map, a fresh array), where BLAS and numpy's
    SIMD loops may sum in another order on some CPUs."""
    assert a.tokens == b.tokens
    assert a.names() == b.names()
    for name in a.names():
        np.testing.assert_allclose(a[name], b[name], atol=atol, rtol=1e-5, err_msg=name)


def assert_npz_holds_trace(path: Path, trace, text: str) -> None:
    """The .npz at `path` holds exactly trace.to_dict(): same names, dtypes, shapes, values."""
    expected = trace.to_dict()
    with np.load(path, allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(expected)
        for name, value in expected.items():
            got = archive[name]
            assert got.dtype == value.dtype and got.shape == value.shape, name
            assert np.array_equal(got, value), name
        assert str(archive["text"]) == text


def edit_config(folder: Path, **changes) -> Path:
    """Change fields of folder/config.json in place; -> its path."""
    path = Path(folder) / "config.json"
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    path.write_text(json.dumps(cfg))
    return path
