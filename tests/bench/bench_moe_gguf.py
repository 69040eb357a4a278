"""A Qwen3-30B-A3B-shaped mixture-of-experts GGUF slice: the real widths (d_model 2048, 32 heads
of 128, 4 K/V heads, 128 experts of 768, top 8, vocabulary 151,936) with fewer layers (default
4 of 48), Q8_0 blocks of random codes (written directly, no quantizer run), then opened and
traced in a fresh process: open time, the first trace of N tokens (every weight read for the
first time), peak RssAnon (anonymous memory: not the memory-mapped file pages), and how many of
the layers' experts were read and dequantized (only those a token is routed to).

    python tests/bench/bench_moe_gguf.py DIR [--layers 4] [--tokens 32]

DIR receives qwen3moe_30b_a3b_slice.gguf (~0.7 GB a layer plus 0.66 GB of embedding and head)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_big import cpu_name, encoded  # noqa: E402
from memory import peak_rss_anon, rss_anon  # noqa: E402

SHAPE = dict(d_model=2048, n_head=32, n_kv=4, d_head=128, n_expert=128, k=8, d_expert=768,
             d_ff=6144, n_vocab=151936)
MIB = 2**20


def q8_0(rng, rows: int, cols: int, scale: float) -> np.ndarray:
    """[rows, cols / 32 * 34] uint8: Q8_0 blocks (fp16 scale, 32 int8 codes) of random codes."""
    blocks = rng.integers(-127, 128, size=(rows, cols // 32, 34), dtype=np.int8).view(np.uint8)
    blocks[:, :, :2] = np.frombuffer(np.float16(scale / 127).tobytes(), np.uint8)
    return blocks.reshape(rows, -1)


def write(path: Path, n_layer: int, seed: int = 0) -> None:
    import gguf
    from gguf import GGMLQuantizationType as Q
    s, rng = SHAPE, np.random.default_rng(seed)
    d, dh = s["d_model"], s["d_head"]
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    writer.add_name("qwen3-30b-a3b-shaped slice")
    for add, value in ((writer.add_context_length, 40960), (writer.add_embedding_length, d),
                       (writer.add_block_count, n_layer), (writer.add_feed_forward_length, s["d_ff"]),
                       (writer.add_head_count, s["n_head"]), (writer.add_head_count_kv, s["n_kv"]),
                       (writer.add_key_length, dh), (writer.add_value_length, dh),
                       (writer.add_expert_count, s["n_expert"]), (writer.add_expert_used_count, s["k"]),
                       (writer.add_expert_feed_forward_length, s["d_expert"])):
        add(value)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1e6)
    writer.add_file_type(7)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(s["n_vocab"] - 3)])
    writer.add_token_scores([0.0] * 3 + [-float(i) for i in range(s["n_vocab"] - 3)])
    writer.add_token_types([2, 3, 3] + [1] * (s["n_vocab"] - 3))
    writer.add_bos_token_id(1), writer.add_eos_token_id(2), writer.add_unk_token_id(0)

    def quantized(name, rows, cols, scale, lead=()):
        data = q8_0(rng, int(np.prod(lead)) * rows, cols, scale).reshape(*lead, rows, -1)
        writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=Q.Q8_0)

    quantized("token_embd.weight", s["n_vocab"], d, 1.0)
    writer.add_tensor("output_norm.weight", np.ones(d, np.float32))
    quantized("output.weight", s["n_vocab"], d, 0.05)
    for i in range(n_layer):
        p = f"blk.{i}."
        for name, width in (("attn_norm", d), ("ffn_norm", d), ("attn_q_norm", dh), ("attn_k_norm", dh)):
            writer.add_tensor(p + name + ".weight", np.ones(width, np.float32))
        quantized(p + "attn_q.weight", s["n_head"] * dh, d, 0.05)
        quantized(p + "attn_k.weight", s["n_kv"] * dh, d, 0.05)
        quantized(p + "attn_v.weight", s["n_kv"] * dh, d, 0.05)
        quantized(p + "attn_output.weight", d, s["n_head"] * dh, 0.05)
        quantized(p + "ffn_gate_inp.weight", s["n_expert"], d, 0.5)
        quantized(p + "ffn_gate_exps.weight", s["d_expert"], d, 0.05, (s["n_expert"],))
        quantized(p + "ffn_up_exps.weight", s["d_expert"], d, 0.05, (s["n_expert"],))
        quantized(p + "ffn_down_exps.weight", d, s["d_expert"], 0.05, (s["n_expert"],))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def measure(path: Path, n_tokens: int) -> dict:
    from transformer_stepper import load_model
    from transformer_stepper.runtime import tune_process

    tune_process()
    base = rss_anon()
    start = time.perf_counter()
    model = load_model(path)
    opened = time.perf_counter() - start
    read: set[tuple[str, int]] = set()
    for f in model.params.ckpt.files:
        original = f.expert

        def counting(name, expert, original=original):
            read.add((name.split(".")[1], expert))
            return original(name, expert)
        f.expert = counting
    ids = np.random.default_rng(1).integers(3, model.config.n_vocab, n_tokens)
    with peak_rss_anon() as peak:
        start = time.perf_counter()
        trace = model.trace_encoded(encoded(ids), detail_layers=(0,))
        traced = time.perf_counter() - start
    chosen = {(str(layer), int(e)) for layer in range(model.config.n_layer)
              for e in np.unique(trace.layer("expert_ids", layer))}
    return {"open_s": round(opened, 2), "trace_s": round(traced, 2),
            "peak_rss_anon_mib": round((peak() - base) / MIB), "experts_read": len(read),
            "experts_chosen": len(chosen), "experts_in_file": model.config.n_layer * model.config.n_expert,
            "read_equals_chosen": read == chosen}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.tokens)))
        return 0
    path = args.dir / "qwen3moe_30b_a3b_slice.gguf"
    if not path.exists():
        start = time.perf_counter()
        write(path, args.layers)
        print(f"wrote {path} ({path.stat().st_size / 2**30:.2f} GiB) in {time.perf_counter() - start:.0f} s")
    out = subprocess.run([sys.executable, __file__, str(args.dir), "--tokens", str(args.tokens),
                          "--measure", str(path)], capture_output=True, text=True, check=True)
    print(f"CPU: {cpu_name()}")
    print(out.stdout.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
