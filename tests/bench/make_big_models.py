"""Random models of real shapes, for the speed and memory benchmarks (not committed):

    python tests/bench/make_big_models.py OUT_DIR [--only gpt2|llama]

  OUT_DIR/gpt2_small_shaped/  GPT-2 small's shape (12 layers, 768 wide, 12 heads, vocab 50,257,
                              1,024 positions), float32, one model.safetensors
  OUT_DIR/llama_1b_shaped/    Llama 3.2 1B's shape (16 layers, 2,048 wide, 32 heads, 8 K/V heads,
                              d_ff 8,192, vocab 128,256, rope llama3 ×32, tied), bfloat16,
                              sharded in 3 files with model.safetensors.index.json
  OUT_DIR/llama_1b_q4_k_m.gguf  the same weights (bf16-rounded, same seed) as llama.cpp's
                              Q4_K_M would store them: Q4_K, with Q6_K for the tied embedding and
                              for attn_v/ffn_down of the layers llama-quantize gives more bits;
                              q/k rows permuted for llama.cpp's rotary; rope_freqs for llama3;
                              the folder's tokenizer as tokenizer.ggml.* (needs the bf16 folder)

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


def _more_bits(layer: int, n_layer: int) -> bool:
    """llama.cpp's use_more_bits: the first and last eighth, and every third layer between."""
    return layer < n_layer // 8 or layer >= 7 * n_layer // 8 or (layer - n_layer // 8) % 3 == 2


def _quantized(w: np.ndarray, kind: str) -> np.ndarray:
    """[rows, cols] float32 -> [rows, bytes] of Q4_K / Q6_K blocks, packed in row chunks."""
    from make_gguf_fixtures import pack_q4_k, pack_q6_k
    pack = pack_q4_k if kind == "Q4_K" else pack_q6_k
    rows, cols = w.shape
    out = []
    for start in range(0, rows, 4096):
        chunk = w[start:start + 4096]
        out.append(pack(chunk.reshape(-1, 256)).reshape(len(chunk), -1))
    return np.concatenate(out)


def llama_gguf(out: Path) -> None:
    """The llama_1b_shaped weights as a Q4_K_M GGUF (see the module docstring)."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    folder = out / "llama_1b_shaped"
    config = json.loads((folder / "config.json").read_text())
    d, n_layer, heads, kv = config["hidden_size"], config["num_hidden_layers"], 32, 8
    ff, vocab, dh = config["intermediate_size"], config["vocab_size"], config["head_dim"]
    writer = gguf.GGUFWriter(str(out / "llama_1b_q4_k_m.gguf"), "llama")
    writer.add_name("llama-1b-shaped-q4_k_m")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(d)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(config["rope_theta"])
    writer.add_vocab_size(vocab)
    writer.add_rope_dimension_count(dh)
    writer.add_file_type(15)                                  # MOSTLY_Q4_K_M
    tok = json.loads((folder / "tokenizer.json").read_text())
    by_id = {i: t for t, i in tok["model"]["vocab"].items()}
    special = {a["id"] for a in tok["added_tokens"]}
    tokens = [by_id.get(i, f"<|reserved_{i}|>") for i in range(vocab)]
    # as in Llama 3: the last 256 ids are control tokens, the others normal (ids the trained
    # 600-token BPE does not use are placeholders no merge makes)
    types = [3 if (i in special or i >= vocab - 256) else 1 for i in range(vocab)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0), writer.add_eos_token_id(0)
    writer.add_add_bos_token(False)
    scaling = config["rope_scaling"]                          # llama.cpp's rope_freqs (llama3)
    freqs = 1.0 / (config["rope_theta"] ** (np.arange(0, dh, 2, dtype=np.float32) / dh))
    wavelen = 2 * np.pi / freqs
    low, high, orig = scaling["low_freq_factor"], scaling["high_freq_factor"], scaling["original_max_position_embeddings"]
    smooth = (orig / wavelen - low) / (high - low)
    factors = np.where(wavelen < orig / high, 1.0, np.where(wavelen > orig / low, scaling["factor"],
                       1 / ((1 - smooth) / scaling["factor"] + smooth))).astype(np.float32)
    writer.add_tensor("rope_freqs.weight", factors)
    leaf = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
            "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
            "mlp.down_proj": "ffn_down"}
    specs = [("model.embed_tokens.weight", (vocab, d))]
    for i in range(n_layer):
        p = f"model.layers.{i}."
        specs += [(p + "input_layernorm.weight", (d,)), (p + "post_attention_layernorm.weight", (d,)),
                  (p + "self_attn.q_proj.weight", (heads * dh, d)), (p + "self_attn.k_proj.weight", (kv * dh, d)),
                  (p + "self_attn.v_proj.weight", (kv * dh, d)), (p + "self_attn.o_proj.weight", (d, heads * dh)),
                  (p + "mlp.gate_proj.weight", (ff, d)), (p + "mlp.up_proj.weight", (ff, d)),
                  (p + "mlp.down_proj.weight", (d, ff))]
    specs.append(("model.norm.weight", (d,)))
    make = maker(2)                                           # the bf16 folder's draw order
    for name, shape in specs:
        w = make(name, shape)
        w = (bf16_bits(w).astype(np.uint32) << 16).view(np.float32).reshape(shape)
        if name == "model.embed_tokens.weight":
            gguf_name, kind = "token_embd.weight", "Q6_K"
        elif name == "model.norm.weight":
            gguf_name, kind = "output_norm.weight", "F32"
        else:
            _, _, i, rest = name.split(".", 3)
            part = rest.rsplit(".", 1)[0]
            gguf_name = f"blk.{i}.{leaf[part]}.weight"
            kind = "F32" if w.ndim == 1 else "Q4_K"
            if leaf[part] in ("attn_v", "ffn_down") and _more_bits(int(i), n_layer):
                kind = "Q6_K"
            if leaf[part] in ("attn_q", "attn_k"):              # LlamaModel.permute
                n = heads if leaf[part] == "attn_q" else kv
                w = w.reshape(n, 2, w.shape[0] // n // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)
        if kind == "F32":
            writer.add_tensor(gguf_name, w)
        else:
            data = _quantized(w, kind)
            writer.add_tensor(gguf_name, data, raw_shape=data.shape, raw_dtype=getattr(Q, kind))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", choices=("gpt2", "llama", "llama_gguf"))
    args = parser.parse_args(argv)
    for name, build in (("gpt2", gpt2), ("llama", llama), ("llama_gguf", llama_gguf)):
        if args.only in (None, name):
            start = time.perf_counter()
            build(args.out)
            print(f"{name}: written in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
