"""A gpt-oss-20b-shaped GGUF at its real size: openai/gpt-oss-20b's widths and all 24 layers
(d_model 2880, 64 query heads of 64, 8 K/V heads, 32 experts of 2880, top 4, vocabulary 201,088,
sliding window 128 on the even layers, YaRN), the experts in MXFP4 blocks of random codes (each
block's exponent byte between 118 and 122, so weights stay below 0.2), attention, embedding and
head in Q8_0 blocks of random codes, router, sinks, norms and biases F32 — written tensor by
tensor (nothing held whole), then opened and traced in a fresh process: open time, the first
trace of N tokens (every weight read for the first time), peak RssAnon (anonymous memory, not
the memory-mapped file), and how many of the file's experts were read and dequantized.

    python tests/bench/bench_gpt_oss_gguf.py DIR [--tokens 32] [--layers 24]

DIR receives gpt_oss_20b_shaped.gguf (~12.1 GB with 24 layers: 10.2 GB of MXFP4 experts, 0.7 GB
of attention, 1.2 GB of embedding and head). llama.cpp's released gpt-oss-20b GGUF keeps its
attention and embedding in other types (F16/BF16); Q8_0 here keeps the file within the disk budget."""
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

from bench_big import cpu_name  # noqa: E402
from bench_moe_gguf import measure, q8_0  # noqa: E402

SHAPE = dict(d_model=2880, n_head=64, n_kv=8, d_head=64, n_expert=32, k=4, d_expert=2880,
             n_vocab=201088, window=128)
MXFP4_BLOCK = 17            # bytes: one exponent byte, 16 bytes of 32 four-bit codes


def mxfp4(rng, lead: int, rows: int, cols: int) -> np.ndarray:
    """[lead, rows, cols / 32 * 17] uint8: MXFP4 blocks of random codes, exponents 118..122."""
    blocks = np.frombuffer(rng.bytes(lead * rows * (cols // 32) * MXFP4_BLOCK), np.uint8).reshape(
        lead, rows, cols // 32, MXFP4_BLOCK).copy()
    blocks[..., 0] = rng.integers(118, 123, size=blocks.shape[:-1], dtype=np.uint8)
    return blocks.reshape(lead, rows, -1)


def tensors(n_layer: int, seed: int):
    """(name, make) in file order; make() -> the stored array (uint8 blocks or float32)."""
    from gguf import GGMLQuantizationType as Q
    s, rng = SHAPE, np.random.default_rng(seed)
    d, dh, e, f = s["d_model"], s["d_head"], s["n_expert"], s["d_expert"]
    small = lambda *shape, scale=1.0: (lambda: (scale * rng.standard_normal(shape)).astype(np.float32), None)
    ones = lambda n: (lambda: np.ones(n, np.float32), None)
    out = [("token_embd.weight", (lambda: q8_0(rng, s["n_vocab"], d, 1.0), Q.Q8_0)),
           ("output_norm.weight", ones(d)),
           ("output.weight", (lambda: q8_0(rng, s["n_vocab"], d, 0.05), Q.Q8_0))]
    for i in range(n_layer):
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", ones(d)), (p + "post_attention_norm.weight", ones(d)),
                (p + "attn_sinks.weight", small(s["n_head"], scale=1.0))]
        for name, rows, cols in (("attn_q", s["n_head"] * dh, d), ("attn_k", s["n_kv"] * dh, d),
                                 ("attn_v", s["n_kv"] * dh, d), ("attn_output", d, s["n_head"] * dh)):
            out += [(p + name + ".weight", (lambda rows=rows, cols=cols: q8_0(rng, rows, cols, 0.05), Q.Q8_0)),
                    (p + name + ".bias", small(rows, scale=0.02))]
        out += [(p + "ffn_gate_inp.weight", small(e, d, scale=0.05)), (p + "ffn_gate_inp.bias", small(e, scale=0.1))]
        for name, rows, cols in (("ffn_gate_exps", f, d), ("ffn_up_exps", f, d), ("ffn_down_exps", d, f)):
            out += [(p + name + ".weight", (lambda rows=rows, cols=cols: mxfp4(rng, e, rows, cols), Q.MXFP4)),
                    (p + name + ".bias", small(e, rows, scale=0.02))]
    return out


def write(path: Path, n_layer: int, seed: int = 0) -> None:
    """The file, one tensor made and written at a time (gguf's add_tensor_info, then
    write_tensor_data in the same order)."""
    import gguf
    s = SHAPE
    arch = "gpt-oss"
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("gpt-oss-20b-shaped (random MXFP4 experts)")
    for add, value in ((writer.add_context_length, 131072), (writer.add_embedding_length, s["d_model"]),
                       (writer.add_block_count, n_layer), (writer.add_feed_forward_length, s["d_expert"]),
                       (writer.add_head_count, s["n_head"]), (writer.add_head_count_kv, s["n_kv"]),
                       (writer.add_key_length, s["d_head"]), (writer.add_value_length, s["d_head"]),
                       (writer.add_expert_count, s["n_expert"]), (writer.add_expert_used_count, s["k"]),
                       (writer.add_expert_feed_forward_length, s["d_expert"]), (writer.add_sliding_window, s["window"]),
                       (writer.add_rope_scaling_orig_ctx_len, 4096)):
        add(value)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(150000.0)
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(32.0)
    writer.add_file_type(38)
    n = s["n_vocab"]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(n - 3)])
    writer.add_token_scores([0.0] * 3 + [-float(i) for i in range(n - 3)])
    writer.add_token_types([2, 3, 3] + [1] * (n - 3))
    writer.add_bos_token_id(1), writer.add_eos_token_id(2), writer.add_unk_token_id(0)
    plan = tensors(n_layer, seed)         # the infos first (sizes from the shapes), then the data
    for name, (make, raw) in plan:
        shape, dtype, nbytes = _planned(name, raw, n_layer)
        writer.add_tensor_info(name, shape, dtype, nbytes, raw_dtype=raw)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for name, (make, raw) in plan:
        writer.write_tensor_data(make())
    writer.close()


def _planned(name: str, raw, n_layer: int):
    """(stored shape, numpy dtype, bytes) of tensor `name` as tensors() makes it."""
    s = SHAPE
    d, dh, e, f = s["d_model"], s["d_head"], s["n_expert"], s["d_expert"]
    leaf = name.split(".")[-2]
    kind = name.split(".")[-1]
    rows = {"token_embd": s["n_vocab"], "output": s["n_vocab"], "attn_q": s["n_head"] * dh, "attn_k": s["n_kv"] * dh,
            "attn_v": s["n_kv"] * dh, "attn_output": d, "ffn_gate_inp": e, "ffn_gate_exps": f, "ffn_up_exps": f,
            "ffn_down_exps": d}
    if raw is None:                                      # float32
        if leaf in ("output_norm", "attn_norm", "post_attention_norm"):
            shape = (d,)
        elif leaf == "attn_sinks":
            shape = (s["n_head"],)
        elif leaf == "ffn_gate_inp" and kind == "weight":
            shape = (e, d)
        elif leaf.endswith("_exps"):
            shape = (e, rows[leaf])
        else:
            shape = (rows[leaf],)
        return shape, np.float32, int(np.prod(shape)) * 4
    cols = s["n_head"] * dh if leaf == "attn_output" else (f if leaf == "ffn_down_exps" else d)
    if leaf.endswith("_exps"):
        shape = (e, rows[leaf], cols // 32 * MXFP4_BLOCK)
    else:
        shape = (rows[leaf], cols // 32 * 34)
    return shape, np.uint8, int(np.prod(shape))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.tokens)))
        return 0
    path = args.dir / ("gpt_oss_20b_shaped.gguf" if args.layers == 24 else f"gpt_oss_20b_shaped_{args.layers}l.gguf")
    if not path.exists():
        start = time.perf_counter()
        write(path, args.layers)
        print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - start:.0f} s")
    out = subprocess.run([sys.executable, __file__, str(args.dir), "--tokens", str(args.tokens),
                          "--measure", str(path)], capture_output=True, text=True)
    if out.returncode:
        print(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}")
        return 1
    print(f"CPU: {cpu_name()}")
    print(out.stdout.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
