"""Random models of real shapes, for the speed and memory benchmarks (not committed):

    python tests/bench/make_big_models.py OUT_DIR [--only gpt2|llama]

  OUT_DIR/gpt2_small_shaped/  GPT-2 small's shape (12 layers, 768 wide, 12 heads, vocab 50,257,
                              1,024 positions), float32, one model.safetensors
  OUT_DIR/llama_1b_shaped/    Llama 3.2 1B's shape (16 layers, 2,048 wide, 32 heads, 8 K/V heads,
                              d_ff 8,192, vocab 128,256, rope llama3 ×32, tied), bfloat16,
                              sharded in 3 files with model.safetensors.index.json

numpy only (no torch), seeded, streamed tensor by tensor; each folder gets a byte-level BPE
tokenizer.json whose ids lie inside the vocabulary. Weights are N(0, 0.02), norms 1: the
numbers mean nothing, the sizes and the arithmetic are real."""
from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np

CORPUS = ("The bank of the river was steep and green. She went to the bank to deposit money. "
          "He walked along the river bank until the sun set behind the hills. ") * 20


def bf16_bits(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def write_safetensors(path: Path, specs: list[tuple[str, tuple[int, ...]]], dtype: str, make) -> None:
    """Header first (sizes known from the shapes), then each tensor as make(name, shape) makes it."""
    itemsize = {"F32": 4, "BF16": 2}[dtype]
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in specs:
        size = int(np.prod(shape)) * itemsize
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(raw)))
        out.write(raw)
        for name, shape in specs:
            value = make(name, shape)
            out.write((bf16_bits(value) if dtype == "BF16" else value.astype(np.float32)).tobytes())


def tokenizer(folder: Path, vocab_size: int) -> None:
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE

    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=min(vocab_size, 600), special_tokens=["<|endoftext|>"],
                                  show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([CORPUS], trainer)
    tok.save(str(folder / "tokenizer.json"))


def maker(seed: int):
    rng = np.random.default_rng(seed)

    def make(name: str, shape: tuple[int, ...]) -> np.ndarray:
        if "norm" in name or name.split(".")[-2:-1] in (["ln_1"], ["ln_2"], ["ln_f"]):
            return np.ones(shape, np.float32) if name.endswith("weight") else np.zeros(shape, np.float32)
        if name.endswith("bias"):
            return np.zeros(shape, np.float32)
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02)
    return make


def gpt2(out: Path) -> None:
    folder = out / "gpt2_small_shaped"
    folder.mkdir(parents=True, exist_ok=True)
    d, n_layer, vocab, ctx = 768, 12, 50257, 1024
    specs = [("wte.weight", (vocab, d)), ("wpe.weight", (ctx, d))]
    for i in range(n_layer):
        p = f"h.{i}."
        specs += [(p + "ln_1.weight", (d,)), (p + "ln_1.bias", (d,)), (p + "attn.c_attn.weight", (d, 3 * d)),
                  (p + "attn.c_attn.bias", (3 * d,)), (p + "attn.c_proj.weight", (d, d)),
                  (p + "attn.c_proj.bias", (d,)), (p + "ln_2.weight", (d,)), (p + "ln_2.bias", (d,)),
                  (p + "mlp.c_fc.weight", (d, 4 * d)), (p + "mlp.c_fc.bias", (4 * d,)),
                  (p + "mlp.c_proj.weight", (4 * d, d)), (p + "mlp.c_proj.bias", (d,))]
    specs += [("ln_f.weight", (d,)), ("ln_f.bias", (d,))]
    write_safetensors(folder / "model.safetensors", specs, "F32", maker(1))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": vocab, "n_embd": d,
        "n_layer": n_layer, "n_head": 12, "n_positions": ctx, "n_inner": None,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}, indent=1))
    tokenizer(folder, vocab)


def llama(out: Path) -> None:
    folder = out / "llama_1b_shaped"
    folder.mkdir(parents=True, exist_ok=True)
    d, n_layer, heads, kv, ff, vocab = 2048, 16, 32, 8, 8192, 128256
    dh = d // heads
    layer_specs = []
    for i in range(n_layer):
        p = f"model.layers.{i}."
        layer_specs.append([(p + "input_layernorm.weight", (d,)), (p + "post_attention_layernorm.weight", (d,)),
                            (p + "self_attn.q_proj.weight", (heads * dh, d)),
                            (p + "self_attn.k_proj.weight", (kv * dh, d)),
                            (p + "self_attn.v_proj.weight", (kv * dh, d)),
                            (p + "self_attn.o_proj.weight", (d, heads * dh)),
                            (p + "mlp.gate_proj.weight", (ff, d)), (p + "mlp.up_proj.weight", (ff, d)),
                            (p + "mlp.down_proj.weight", (d, ff))])
    shards = [[("model.embed_tokens.weight", (vocab, d))] + sum(layer_specs[:5], []),
              sum(layer_specs[5:11], []), sum(layer_specs[11:], []) + [("model.norm.weight", (d,))]]
    weight_map = {}
    make = maker(2)
    for index, specs in enumerate(shards):
        name = f"model-{index + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(folder / name, specs, "BF16", make)
        weight_map.update({tensor: name for tensor, _ in specs})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": vocab,
        "hidden_size": d, "num_hidden_layers": n_layer, "num_attention_heads": heads,
        "num_key_value_heads": kv, "head_dim": dh, "intermediate_size": ff, "hidden_act": "silu",
        "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False,
        "torch_dtype": "bfloat16"}, indent=1))
    tokenizer(folder, vocab)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", choices=("gpt2", "llama"))
    args = parser.parse_args(argv)
    for name, build in (("gpt2", gpt2), ("llama", llama)):
        if args.only in (None, name):
            start = time.perf_counter()
            build(args.out)
            print(f"{name}: written in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
