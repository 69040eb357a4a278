"""A Qwen3-30B-A3B-shaped mixture-of-experts GGUF, random weights, opened and traced in a fresh
process: open time, the first view of N tokens (every weight read for the first time: the pass
over every token with layer 0's detail, then the last position's predictions), wall and CPU
time, peak RssAnon (anonymous memory: not the memory-mapped file pages), and which experts were
read: how many expert slices of the 3-D tensors the pass decoded (gate, up and down of each
expert a token was routed to) out of all of them.

    python tests/bench/bench_moe_gguf.py DIR                              # 4 of 48 layers, Q8_0
    python tests/bench/bench_moe_gguf.py DIR --layers 48 --scheme Q4_K_M  # the real size, 18 GB

The shape and the metadata copy Qwen/Qwen3-30B-A3B's config.json: hidden_size 2048, 48 layers,
32 heads of head_dim 128, 4 K/V heads, num_experts 128, num_experts_per_tok 8,
moe_intermediate_size 768, intermediate_size 6144, vocab_size 151,936, rope_theta 1e6,
rms_norm_eps 1e-6, max_position_embeddings 40,960, norm_topk_prob true (llama.cpp's qwen3moe
always divides the gates by their sum). Q4_K_M is laid out as llama-quantize lays it out
(llama_tensor_get_type): Q4_K, with Q6_K for output.weight and for attn_v and ffn_down_exps of
the layers use_more_bits picks; ffn_gate_inp (the router) and the norms F32. The quantized
tensors are random but valid blocks written directly (fp16 scales chosen so the weights have a
standard deviation near 0.02; no quantizer is run: the 18 GB file is written at disk speed), the
routers N(0, 0.02) floats. Streamed tensor by tensor, so memory stays near one tensor. The
tokenizer is a small byte-level BPE (tests/bench/make_real_size.py); the bench traces token ids.

DIR receives qwen3moe_30b_a3b_{L}layers_{scheme}.gguf."""
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
             d_ff=6144, n_vocab=151936, ctx=40960, theta=1e6, eps=1e-6)
BLOCKS = {"Q8_0": (32, 34), "Q4_K": (256, 144), "Q6_K": (256, 210)}     # weights, bytes a block
FILE_TYPES = {"Q8_0": 7, "Q4_K_M": 15}
MIB = 2**20


def random_blocks(rng, kind: str, n_blocks: int) -> np.ndarray:
    """[n_blocks, bytes] uint8: valid blocks of random codes whose weights have a standard
    deviation near 0.02 (each formula's scale fixed per type, its codes and sub-scales random)."""
    size = BLOCKS[kind][1]
    blocks = np.frombuffer(rng.bytes(n_blocks * size), np.uint8).reshape(n_blocks, size).copy()
    if kind == "Q8_0":          # d · q, q int8 uniform: std 74 d
        blocks[:, 0:2] = np.frombuffer(np.float16(2.7e-4).tobytes(), np.uint8)
    elif kind == "Q4_K":        # d · sc · q − dmin · m, sc m 6 bits, q 4: zero mean with dmin = 7.5 d
        blocks[:, 0:2] = np.frombuffer(np.float16(7.8e-5).tobytes(), np.uint8)
        blocks[:, 2:4] = np.frombuffer(np.float16(5.85e-4).tobytes(), np.uint8)
    else:                       # Q6_K: d · sc · (q − 32), sc int8 kept within ±16
        blocks[:, 192:208] = (blocks[:, 192:208].view(np.int8) >> 3).view(np.uint8)
        blocks[:, 208:210] = np.frombuffer(np.float16(1.1e-4).tobytes(), np.uint8)
    return blocks


def tensor_kind(leaf: str, layer: int, scheme: str, n_layer: int) -> str:
    from make_real_size import _more_bits         # llama.cpp's use_more_bits
    if leaf.endswith("norm") or leaf == "ffn_gate_inp":
        return "F32"
    if scheme == "Q8_0":
        return "Q8_0"
    if leaf == "output" or (leaf in ("attn_v", "ffn_down_exps") and _more_bits(layer, n_layer)):
        return "Q6_K"
    return "Q4_K"


def tensor_specs(n_layer: int) -> list[tuple[str, str, int, tuple[int, ...]]]:
    """(GGUF name, leaf, layer, numpy shape) in the file's order."""
    s, d, dh = SHAPE, SHAPE["d_model"], SHAPE["d_head"]
    specs = [("token_embd.weight", "token_embd", -1, (s["n_vocab"], d))]
    for i in range(n_layer):
        e, de = s["n_expert"], s["d_expert"]
        for leaf, shape in (("attn_norm", (d,)), ("attn_q", (s["n_head"] * dh, d)), ("attn_k", (s["n_kv"] * dh, d)),
                            ("attn_v", (s["n_kv"] * dh, d)), ("attn_output", (d, s["n_head"] * dh)),
                            ("attn_q_norm", (dh,)), ("attn_k_norm", (dh,)), ("ffn_norm", (d,)),
                            ("ffn_gate_inp", (e, d)), ("ffn_gate_exps", (e, de, d)),
                            ("ffn_up_exps", (e, de, d)), ("ffn_down_exps", (e, d, de))):
            specs.append((f"blk.{i}.{leaf}.weight", leaf, i, shape))
    specs += [("output_norm.weight", "output_norm", -1, (d,)), ("output.weight", "output", -1, (s["n_vocab"], d))]
    return specs


def _metadata(writer, n_layer: int, scheme: str) -> None:
    from make_real_size import _tokenizer_metadata
    s = SHAPE
    writer.add_name(f"qwen3-30b-a3b-shaped-{scheme.lower()}")
    for add, value in ((writer.add_context_length, s["ctx"]), (writer.add_embedding_length, s["d_model"]),
                       (writer.add_block_count, n_layer), (writer.add_feed_forward_length, s["d_ff"]),
                       (writer.add_head_count, s["n_head"]), (writer.add_head_count_kv, s["n_kv"]),
                       (writer.add_key_length, s["d_head"]), (writer.add_value_length, s["d_head"]),
                       (writer.add_expert_count, s["n_expert"]), (writer.add_expert_used_count, s["k"]),
                       (writer.add_expert_feed_forward_length, s["d_expert"]),
                       (writer.add_vocab_size, s["n_vocab"]), (writer.add_file_type, FILE_TYPES[scheme])):
        add(value)
    writer.add_layer_norm_rms_eps(s["eps"])
    writer.add_rope_freq_base(s["theta"])
    _tokenizer_metadata(writer, s["n_vocab"])


def write(path: Path, n_layer: int, scheme: str, seed: int = 0) -> None:
    import gguf
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    _metadata(writer, n_layer, scheme)
    specs = [(name, tensor_kind(leaf, layer, scheme, n_layer), shape)
             for name, leaf, layer, shape in tensor_specs(n_layer)]
    for name, kind, shape in specs:
        if kind == "F32":
            writer.add_tensor_info(name, shape, np.dtype(np.float32), 4 * int(np.prod(shape)))
        else:
            block, size = BLOCKS[kind]
            byte_shape = (*shape[:-1], shape[-1] // block * size)
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)),
                                   raw_dtype=gguf.GGMLQuantizationType[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for name, kind, shape in specs:
        if kind == "F32":
            scale = 0.02 if name.endswith("ffn_gate_inp.weight") else 0.0
            data = np.ones(shape, np.float32) if scale == 0 else rng.standard_normal(shape, np.float32) * np.float32(scale)
        else:
            block, _ = BLOCKS[kind]
            data = random_blocks(rng, kind, int(np.prod(shape)) // block).reshape(*shape[:-1], -1)
        writer.write_tensor_data(data)
    writer.close()


def measure(path: Path, n_tokens: int) -> dict:
    from transformer_stepper import load_model
    from transformer_stepper.core.model import quantized
    from transformer_stepper.runtime import tune_process

    tune_process()
    base = rss_anon()
    out: dict = {}
    with peak_rss_anon() as peak:
        start = time.perf_counter()
        quantized.kernels()                      # numba's import and its cached kernels' load
        out["kernels_s"] = round(time.perf_counter() - start, 2)
        start, cpu = time.perf_counter(), time.process_time()
        model = load_model(path)
        out["open_s"], out["open_cpu_s"] = round(time.perf_counter() - start, 2), round(time.process_time() - cpu, 2)
        read = _count_expert_reads(model)
        ids = np.random.default_rng(1).integers(3, model.config.n_vocab, n_tokens)
        start, cpu = time.perf_counter(), time.process_time()
        trace = model.retrace(None, encoded(ids), detail_layers=(0,))
        trace.logits_at(-1)
        out["first_view_s"] = round(time.perf_counter() - start, 2)
        out["first_view_cpu_s"] = round(time.process_time() - cpu, 2)
    n_layer, n_expert = model.config.n_layer, model.config.n_expert
    chosen = {(layer, int(e)) for layer in range(n_layer) for e in np.unique(trace.layer("expert_ids", layer))}
    out.update(peak_rss_anon_mib=round((peak() - base) / MIB), n_tokens=n_tokens,
               expert_slices_decoded=len(read), expert_slices_in_file=3 * n_layer * n_expert,
               experts_chosen=len(chosen), experts_in_file=n_layer * n_expert,
               decoded_equals_chosen={(layer, e) for layer, e, _ in read} == chosen,
               widened_mib=round(model.params.nbytes_widened() / MIB))
    return out


def _count_expert_reads(model) -> set:
    """Every (layer, expert, matrix) whose slice a product decoded or a read dequantized."""
    read: set = set()
    params = model.params
    product = getattr(params, "product", None)
    if product is not None:
        def counting(name, x, table=False):
            y = product(name, x, table)
            if y is not None and ".moe.expert." in name:
                _, layer, _, _, e, leaf, _ = name.split(".")
                read.add((int(layer), int(e), leaf))
            return y
        params.product = counting
    leaves = {"ffn_gate_exps": "gate", "ffn_up_exps": "up", "ffn_down_exps": "proj"}
    for f in params.ckpt.files:
        original = f.expert

        def sliced(name, expert, original=original):
            read.add((int(name.split(".")[1]), int(expert), leaves[name.split(".")[2]]))
            return original(name, expert)
        f.expert = sliced
    return read


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--scheme", choices=tuple(FILE_TYPES), default="Q8_0")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.tokens)))
        return 0
    path = args.dir / f"qwen3moe_30b_a3b_{args.layers}layers_{args.scheme.lower()}.gguf"
    if not path.exists():
        partial = path.with_suffix(".partial")
        start = time.perf_counter()
        write(partial, args.layers, args.scheme)
        partial.rename(path)
        print(f"wrote {path} ({path.stat().st_size / 2**30:.2f} GiB) in {time.perf_counter() - start:.0f} s")
    out = subprocess.run([sys.executable, __file__, str(args.dir), "--tokens", str(args.tokens),
                          "--measure", str(path)], capture_output=True, text=True)
    if out.returncode:
        print(out.stderr[-3000:])
        return out.returncode
    print(f"CPU: {cpu_name()}")
    print(out.stdout.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
