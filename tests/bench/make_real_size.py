"""GGUF files of real 8B shapes, random weights, for tests/bench/bench_real_size.py (not committed):

    python tests/bench/make_real_size.py OUT_DIR [--shape llama8b|qwen3_8b] [--scheme Q4_K_M ...]

  OUT_DIR/llama8b_q4_k_m.gguf   Llama-3.1-8B's shape: 32 layers, d 4,096, 32 heads, 8 K/V heads,
                                FFN 14,336, vocab 128,256, rope llama3 x8 (rope_freqs), untied
  OUT_DIR/qwen3_8b_q4_k_m.gguf  Qwen3-8B's: 36 layers, d 4,096, 32 heads, 8 K/V, head_dim 128,
                                q/k norms, FFN 12,288, vocab 151,936, untied

F16 (every matrix float16) is the source llama.cpp's own quantizer reads
(tests/bench/quantize_real_size.py: much faster than the Python packers).

--random-blocks writes the quantized blocks directly as random codes (Q4_K, Q5_K, Q6_K, Q8_0: every code
and 6-bit scale uniform, the block's d / dmin fixed so the decoded weights have a mean near 0
and a standard deviation near 0.02): seconds instead of the packers' half hour or more; the
model's weights are what those blocks decode to.

The schemes follow llama-quantize's choices (llama_tensor_get_type): Q4_K_M = Q4_K with Q6_K
for output.weight and for attn_v / ffn_down of the layers use_more_bits picks; Q5_K_M the same
with Q5_K; Q6_K and Q8_0 everything in that type (1-D tensors F32). The packers are the
project's own round-to-nearest encoders of llama.cpp's layouts (tests/gguf_packers.py for
Q4_K, Q5_K and Q6_K, gguf.quants for Q8_0), each checked against gguf.quants'
dequantization on the first rows it packs. Streamed tensor by tensor (the header first), so
memory stays near one tensor's float32. Weights are N(0, 0.02), norms 1; q/k rows are permuted
as llama.cpp's converter does for Llama. The tokenizer is a small byte-level BPE trained on a
short corpus, its ids inside the vocabulary (tests/bench/make_big_models.py)."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from make_big_models import tokenizer as train_tokenizer  # noqa: E402
from gguf_packers import pack_q4_k, pack_q5_k, pack_q6_k  # noqa: E402

SHAPES = {
    "llama8b": dict(arch="llama", n_layer=32, d=4096, heads=32, kv=8, dh=128, ff=14336, vocab=128256,
                    theta=500000.0, ctx=131072, qk_norm=False),
    "qwen3_8b": dict(arch="qwen3", n_layer=36, d=4096, heads=32, kv=8, dh=128, ff=12288, vocab=151936,
                     theta=1000000.0, ctx=40960, qk_norm=True),
}
SCHEMES = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "F16")
FILE_TYPES = {"Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18, "Q8_0": 7, "F16": 1}       # llama_ftype
ROW_CHUNK = 2048


def _pack_q8_0(x: np.ndarray) -> np.ndarray:
    import gguf
    return gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)


PACKERS = {"Q4_K": (pack_q4_k, 256, 144), "Q5_K": (pack_q5_k, 256, 176), "Q6_K": (pack_q6_k, 256, 210),
           "Q8_0": (_pack_q8_0, 32, 34)}
LIMITS = {"Q4_K": 0.1, "Q5_K": 0.05, "Q6_K": 0.04, "Q8_0": 0.01}      # max error / max |w|


def _more_bits(layer: int, n_layer: int) -> bool:
    """llama.cpp's use_more_bits: the first and last eighth, and every third layer between."""
    return layer < n_layer // 8 or layer >= 7 * n_layer // 8 or (layer - n_layer // 8) % 3 == 2


def tensor_kind(name: str, scheme: str, n_layer: int) -> str:
    if name.endswith("norm.weight") or name == "rope_freqs.weight":
        return "F32"
    if scheme in ("Q6_K", "Q8_0", "F16"):
        return scheme
    base = "Q4_K" if scheme == "Q4_K_M" else "Q5_K"
    if name == "output.weight":
        return "Q6_K"
    parts = name.split(".")
    if parts[0] == "blk" and parts[2] in ("attn_v", "ffn_down") and _more_bits(int(parts[1]), n_layer):
        return "Q6_K"
    return base


def tensor_specs(s: dict) -> list[tuple[str, tuple[int, ...]]]:
    d, dq, dkv = s["d"], s["heads"] * s["dh"], s["kv"] * s["dh"]
    specs = [("rope_freqs.weight", (s["dh"] // 2,))] if s["arch"] == "llama" else []
    specs.append(("token_embd.weight", (s["vocab"], d)))
    for i in range(s["n_layer"]):
        p = f"blk.{i}."
        specs += [(p + "attn_norm.weight", (d,)), (p + "attn_q.weight", (dq, d)),
                  (p + "attn_k.weight", (dkv, d)), (p + "attn_v.weight", (dkv, d)),
                  (p + "attn_output.weight", (d, dq))]
        if s["qk_norm"]:
            specs += [(p + "attn_q_norm.weight", (s["dh"],)), (p + "attn_k_norm.weight", (s["dh"],))]
        specs += [(p + "ffn_norm.weight", (d,)), (p + "ffn_gate.weight", (s["ff"], d)),
                  (p + "ffn_up.weight", (s["ff"], d)), (p + "ffn_down.weight", (d, s["ff"]))]
    specs += [("output_norm.weight", (d,)), ("output.weight", (s["vocab"], d))]
    return specs


def _llama3_factors(dh: int, theta: float) -> np.ndarray:
    """Llama 3.1's rope scaling (factor 8, low 1, high 4, original context 8,192) as llama.cpp
    stores it: one factor per frequency."""
    freqs = 1.0 / (theta ** (np.arange(0, dh, 2, dtype=np.float32) / dh))
    wavelen = 2 * np.pi / freqs
    factor, low, high, orig = 8.0, 1.0, 4.0, 8192
    smooth = (orig / wavelen - low) / (high - low)
    return np.where(wavelen < orig / high, 1.0, np.where(wavelen > orig / low, factor,
                    1 / ((1 - smooth) / factor + smooth))).astype(np.float32)


def _tokenizer_metadata(writer, vocab: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        train_tokenizer(Path(tmp), vocab)
        tok = json.loads((Path(tmp) / "tokenizer.json").read_text())
    by_id = {i: t for t, i in tok["model"]["vocab"].items()}
    special = {a["id"] for a in tok["added_tokens"]}
    tokens = [by_id.get(i, f"<|reserved_{i}|>") for i in range(vocab)]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")           # llama.cpp's name (it refuses "gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if (i in special or i >= vocab - 256) else 1 for i in range(vocab)])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_add_bos_token(False)


def _header(writer, s: dict, scheme: str, name: str) -> None:
    writer.add_name(name)
    writer.add_context_length(s["ctx"])
    writer.add_embedding_length(s["d"])
    writer.add_block_count(s["n_layer"])
    writer.add_feed_forward_length(s["ff"])
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv"])
    writer.add_key_length(s["dh"])
    writer.add_value_length(s["dh"])
    writer.add_layer_norm_rms_eps(1e-5 if s["arch"] == "llama" else 1e-6)
    writer.add_rope_freq_base(s["theta"])
    writer.add_rope_dimension_count(s["dh"])
    writer.add_vocab_size(s["vocab"])
    writer.add_file_type(FILE_TYPES[scheme])
    _tokenizer_metadata(writer, s["vocab"])


def _packed(w: np.ndarray, kind: str, checked: list) -> np.ndarray:
    pack, block, nbytes = PACKERS[kind]
    data = pack(w.reshape(-1, block)).reshape(w.shape[0], -1)
    if kind not in checked:                               # the layout is right: dequantize back
        import gguf
        back = gguf.quants.dequantize(data[:8], getattr(gguf.GGMLQuantizationType, kind))
        error = np.abs(back - w[:8]).max() / (np.abs(w[:8]).max() + 1e-12)
        assert error < LIMITS[kind], (kind, error)
        checked.append(kind)
    return data


# the fixed f16 fields of a random block, chosen so the decoded weights have std ~0.02: Q4_K's
# w = d*sc*q - dmin*m (sc, m in 0..63, q in 0..15; dmin = 7.5 d centres it), Q6_K's
# w = d*sc*(q - 32) (sc in -128..127, q in 0..63), Q5_K's as Q4_K's with q in 0..31, Q8_0's
# w = d*q (q in -128..127)
RANDOM_FIELDS = {"Q4_K": ((0, 7.4e-5), (2, 7.5 * 7.4e-5)), "Q6_K": ((208, 1.47e-5),),
                 "Q5_K": ((0, 3.8e-5), (2, 15.5 * 3.8e-5)), "Q8_0": ((0, 2.7e-4),)}


def _random_blocks(rng, rows: int, cols: int, kind: str) -> np.ndarray:
    _, block, nbytes = PACKERS[kind]
    data = rng.integers(0, 256, (rows, cols // block, nbytes), dtype=np.uint8)
    for offset, value in RANDOM_FIELDS[kind]:
        data[:, :, offset:offset + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
    return data.reshape(rows, -1)


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:        # llama.cpp's LlamaModel.permute
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


def write_file(path: Path, shape: str, scheme: str, seed: int = 8, random_blocks: bool = False) -> None:
    import gguf
    s = SHAPES[shape]
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), s["arch"])
    _header(writer, s, scheme, f"{shape}-shaped-{scheme.lower()}")
    specs = tensor_specs(s)
    kinds = {}
    for name, shp in specs:
        kind = tensor_kind(name, scheme, s["n_layer"])
        kinds[name] = kind
        if kind in ("F32", "F16"):
            dtype = np.dtype(np.float32 if kind == "F32" else np.float16)
            writer.add_tensor_info(name, shp, dtype, dtype.itemsize * int(np.prod(shp)))
        else:
            _, block, nbytes = PACKERS[kind]
            byte_shape = (shp[0], shp[1] // block * nbytes)
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), shp[0] * byte_shape[1],
                                   raw_dtype=getattr(gguf.GGMLQuantizationType, kind))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    checked: list = []
    start = time.perf_counter()
    for name, shp in specs:
        kind = kinds[name]
        if name == "rope_freqs.weight":
            writer.write_tensor_data(_llama3_factors(s["dh"], s["theta"]))
            continue
        if kind == "F32":
            writer.write_tensor_data(np.ones(shp, np.float32))
            continue
        chunks = []
        if random_blocks and kind in RANDOM_FIELDS:
            chunks.append(_random_blocks(rng, shp[0], shp[1], kind))
        for row in range(0, shp[0] if not chunks else 0, ROW_CHUNK):
            w = rng.standard_normal((min(ROW_CHUNK, shp[0] - row), shp[1]), dtype=np.float32)
            w *= np.float32(0.02)
            chunks.append(w.astype(np.float16) if kind == "F16" else _packed(w, kind, checked))
        data = np.concatenate(chunks)
        leaf = name.split(".")[2] if name.startswith("blk.") else ""
        if s["arch"] == "llama" and leaf in ("attn_q", "attn_k"):
            data = _permute(data, s["heads"] if leaf == "attn_q" else s["kv"])
        writer.write_tensor_data(data)
        print(f"  {name} {kind} {shp} ({time.perf_counter() - start:.0f} s)", flush=True)
    writer.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=tuple(SHAPES), default="llama8b")
    parser.add_argument("--scheme", choices=SCHEMES, nargs="+", default=["Q4_K_M"])
    parser.add_argument("--random-blocks", action="store_true",
                        help="Q4_K / Q6_K blocks of random codes instead of packed N(0, 0.02) weights")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for scheme in args.scheme:
        path = args.out / f"{args.shape}_{scheme.lower()}.gguf"
        if path.exists():
            print(f"{path} exists; kept")
            continue
        partial = path.with_suffix(".partial")
        start = time.perf_counter()
        write_file(partial, args.shape, scheme, random_blocks=args.random_blocks)
        partial.rename(path)
        print(f"{path}: {path.stat().st_size / 1e9:.2f} GB in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
