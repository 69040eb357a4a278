"""Generate the committed GGUF reference fixtures in tests/fixtures/gguf/.

How to run (torch, transformers and accelerate are needed by this script only; transformers'
GGUF loading asks for accelerate):

    python tests/make_gguf_fixtures.py [--out DIR]

For each fixture: a tiny random Hugging Face model (fp32, seeded, config fields of the real
family scaled down; K-quant models have 256-wide rows as those formats need) is written as a
GGUF with gguf-py's GGUFWriter following llama.cpp's convert_hf_to_gguf.py conventions (its
metadata keys; Llama q/k rows permuted for llama.cpp's rotary; Gemma norms stored as 1 + w;
GPT-2 Conv1D weights transposed to [out, in] and the head written as output.weight; tied models
without output.weight; 1-D tensors in F32) and quantized with gguf.quants (Q8_0, Q4_0) or with
the project's block packers (tests/gguf_packers.py: Q2_K-Q6_K, IQ4_XS, IQ4_NL, MXFP4, simple
round-to-nearest encoders of llama.cpp's exact layouts, checked by dequantizing with
gguf.quants). The mixed schemes follow llama-quantize's choices, simplified (MIXES): "Q4_K_M"
mixes Q4_K with Q6_K for the head (or tied embedding), attn_v and ffn_down of the first layer;
"Q5_K_M" likewise with Q5_K; "Q3_K_M" has Q5_K for those two, "Q2_K" Q3_K; "IQ4_XS" keeps a
Q6_K head; "IQ4_NL" on 64-wide rows a Q8_0 head; "MXFP4" is gpt-oss's MXFP4_MOE on a Llama
shape: MXFP4 for every weight of the blocks, Q8_0 outside them.

    python tests/make_gguf_fixtures.py --only llama_k --schemes Q5_K_M   # one file

Then Hugging Face loads the file itself: `AutoModelForCausalLM.from_pretrained(dir,
gguf_file=..., torch_dtype=float32, attn_implementation="eager")` and `AutoTokenizer
.from_pretrained(dir, gguf_file=...)`, and its outputs are saved (hidden states, attentions,
logits, 12 greedy tokens with an explicit attention_mask, tokenizer ids of varied texts).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_fixtures import provenance, save_npz  # noqa: E402  (byte-stable npz writer)
from gguf_packers import PACKERS, pack_q4_k, pack_q6_k  # noqa: E402,F401  (the project's block packers)

OUT = HERE / "fixtures" / "gguf"
SEED = 2027
TEXTS = ("The bank of the river.", "Ünïcödé café — ☕ 日本 12345!",
         "She went to the bank to deposit money, then walked along the river bank.")
TOKENIZER_TEXTS = TEXTS + ("  two  spaces\tand\nnew lines", "def f(x):\n    return x ** 2  # 3.14159",
                           "1234567 + 89 = 1234656", "emoji 🙂🙃 and Ω≈ç√", "<s> </s> <|endoftext|> <bos>")
WORDS = ("the of and to a in is it was he she for on bank river money deposit went walked along "
         "then sun set behind hills water boat city day old man counted his time flies like an "
         "arrow fruit banana return def x f").split()

def quantize(w: np.ndarray, qtype):
    import gguf
    from gguf import GGMLQuantizationType as Q
    if qtype in (Q.F32, Q.F16, Q.Q8_0, Q.Q4_0):
        return gguf.quants.quantize(w, qtype)
    block_size = gguf.GGML_QUANT_SIZES[qtype][0]
    packed = PACKERS[qtype.name](w.reshape(-1, block_size)).reshape(w.shape[0], -1)
    error = np.abs(gguf.quants.dequantize(packed, qtype) - w).max() / (np.abs(w).max() + 1e-12)
    assert error < MAX_ERROR[qtype.name], (qtype.name, error)  # the layout is right
    return packed


# the largest error of a packed tensor relative to its largest weight: the layout is right
MAX_ERROR = {"Q4_K": 0.1, "Q6_K": 0.04, "Q5_K": 0.05, "Q3_K": 0.25, "Q2_K": 0.35, "IQ4_XS": 0.1,
             "IQ4_NL": 0.1, "MXFP4": 0.2}
# llama-quantize's mixes, simplified: (the type of most 2-D weights, of the head, of layer 0's
# attn_v and ffn_down); rows not a multiple of 256 fall back to Q8_0 for a K-type head
MIXES = {"Q4_K_M": ("Q4_K", "Q6_K", "Q6_K"), "Q5_K_M": ("Q5_K", "Q6_K", "Q6_K"),
         "Q3_K_M": ("Q3_K", "Q6_K", "Q5_K"), "Q2_K": ("Q2_K", "Q6_K", "Q3_K"),
         "IQ4_XS": ("IQ4_XS", "Q6_K", "IQ4_XS"), "IQ4_NL": ("IQ4_NL", "Q6_K", "IQ4_NL"),
         "MXFP4": ("MXFP4", "Q8_0", "MXFP4"), "Q4_0": ("Q4_0", "Q6_K", "Q4_0")}
FILE_TYPES = {"F16": 1, "Q8_0": 7, "Q4_0": 2, "Q6_K": 18, "Q4_K_M": 15, "Q5_K_M": 17, "Q3_K_M": 12,
              "Q2_K": 10, "IQ4_XS": 30, "IQ4_NL": 25, "MXFP4": 38}


def tensor_type(name: str, w: np.ndarray, scheme: str, tied: bool):
    from gguf import GGMLQuantizationType as Q
    if w.ndim == 1:
        return Q.F32
    if scheme in ("F16", "Q8_0", "Q6_K"):
        return getattr(Q, scheme)
    most, head_type, first_type = MIXES[scheme]
    head = name == "output.weight" or (tied and name == "token_embd.weight")
    if scheme == "MXFP4":     # gpt-oss's MXFP4_MOE: MXFP4 inside the blocks, Q8_0 outside
        return Q.MXFP4 if name.startswith("blk.") else Q.Q8_0
    if head:
        return Q[head_type] if w.shape[1] % 256 == 0 else Q.Q8_0
    if name in ("blk.0.attn_v.weight", "blk.0.ffn_down.weight"):
        return Q[first_type]
    return Q[most]


# ------------------------------------------------------------------ tokenizers


def spm_vocab(arch: str) -> tuple[list[str], list[float], list[int]]:
    """SentencePiece-style vocabulary: specials, 256 byte tokens, characters, and every prefix
    of '▁word' (so the merges recovered from the scores reach each word)."""
    if arch == "gemma":
        tokens, types = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"], [3, 3, 3, 2, 3]
    else:
        tokens, types = ["<unk>", "<s>", "</s>"], [2, 3, 3]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    chars = sorted(set("".join(WORDS)) | set("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?:;()'\"-+=*#"))
    pieces = ["▁"] + chars + (["  ", "   "] if arch == "gemma" else [])
    for word in WORDS:
        pieces += ["▁" + word[:i] for i in range(1, len(word) + 1)]
    seen = set(tokens)
    for piece in pieces:
        if piece not in seen:
            seen.add(piece)
            tokens.append(piece)
            types.append(1)
    scores = [0.0 if t in (2, 3, 6) else -float(i) for i, t in enumerate(types)]
    return tokens, scores, types


def bpe_vocab() -> tuple[list[str], list[int], list[str]]:
    """The byte-level BPE of the committed qwen2_tiny fixture (tokens by id, merges)."""
    doc = json.loads((HERE / "fixtures" / "qwen2_tiny" / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = doc["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    types = [3 if t == "<|endoftext|>" else 1 for t in tokens]
    merges = [" ".join(m) if isinstance(m, list) else m for m in doc["model"]["merges"]]
    return tokens, types, merges


# ------------------------------------------------------------------ fixtures

FIXTURES = {  # name: (arch, HF config overrides, tokenizer, pre, schemes)
    "llama_small": ("llama", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                  num_key_value_heads=2, num_hidden_layers=2, rope_theta=10000.0,
                                  rms_norm_eps=1e-5, tie_word_embeddings=False),
                    "spm", None, ("F16", "Q8_0", "Q4_0", "IQ4_NL", "MXFP4")),
    "llama_k": ("llama", dict(hidden_size=256, intermediate_size=256, num_attention_heads=4,
                              num_key_value_heads=2, num_hidden_layers=1, rope_theta=500000.0,
                              rms_norm_eps=1e-5, tie_word_embeddings=False),
                "bpe", "llama-bpe", ("Q4_K_M", "Q5_K_M", "Q3_K_M", "Q2_K", "IQ4_XS")),
    "qwen2_small": ("qwen2", dict(hidden_size=64, intermediate_size=96, num_attention_heads=4,
                                  num_key_value_heads=2, num_hidden_layers=2, rope_theta=1000000.0,
                                  rms_norm_eps=1e-6, tie_word_embeddings=False),
                    "bpe", "qwen2", ("Q8_0",)),
    "qwen3_k": ("qwen3", dict(hidden_size=256, intermediate_size=256, num_attention_heads=2,
                              num_key_value_heads=1, head_dim=128, num_hidden_layers=1,
                              rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
                "bpe", "qwen2", ("Q4_K_M",)),
    "gemma_k": ("gemma", dict(hidden_size=256, intermediate_size=256, num_attention_heads=2,
                              num_key_value_heads=1, head_dim=128, num_hidden_layers=1,
                              rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh"),
                "spm", None, ("Q6_K",)),
    "gpt2_small": ("gpt2", dict(n_embd=64, n_head=4, n_layer=2, n_positions=1024,
                                activation_function="gelu_new"), "bpe", "gpt-2", ("Q4_0",)),
}
HF_CLASSES = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "qwen3": "Qwen3Config",
              "gemma": "GemmaConfig", "gpt2": "GPT2Config"}


def hf_model(arch: str, overrides: dict, n_vocab: int, seed: int):
    import torch
    import transformers
    config = getattr(transformers, HF_CLASSES[arch])(vocab_size=n_vocab, **overrides)
    if arch != "gpt2":
        config.max_position_embeddings = 128
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or ".ln_" in name or "ln_f" in name:
                p.copy_((1.0 if "weight" in name else 0.0) + 0.2 * torch.randn_like(p))
                if arch == "gemma" and name.endswith("norm.weight"):
                    p.copy_(0.2 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p) / max(1.0, p.shape[-1] ** 0.25))
    return model


def permute(w: np.ndarray, n_head: int) -> np.ndarray:  # llama.cpp's LlamaModel.permute
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(arch: str, model, cfg) -> list[tuple[str, np.ndarray]]:
    """HF state dict -> llama.cpp names and layouts."""
    state = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    out = []
    if arch == "gpt2":
        leaf = {"ln_1": "attn_norm", "ln_2": "ffn_norm", "attn.c_attn": "attn_qkv",
                "attn.c_proj": "attn_output", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
        for name, w in state.items():
            if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":
                continue
            name = name.removeprefix("transformer.")
            if name.startswith("h."):
                _, i, rest = name.split(".", 2)
                part, kind = rest.rsplit(".", 1)
                if kind == "weight" and part in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
                    w = w.T.copy()
                out.append((f"blk.{i}.{leaf[part]}.{kind}", w))
            else:
                top = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
                       "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias"}[name]
                out.append((top, w))
                if top == "token_embd.weight":  # GPT2Model.modify_tensors: the head is wte
                    out.append(("output.weight", w.copy()))
        return out
    leaf = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
            "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
            "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
            "mlp.down_proj": "ffn_down"}
    for name, w in state.items():
        if name == "lm_head.weight":
            if cfg.tie_word_embeddings:
                continue
            out.append(("output.weight", w))
            continue
        if arch == "gemma" and name.endswith("norm.weight"):
            w = w + np.float32(1.0)
        if arch == "llama" and name.endswith(("q_proj.weight", "q_proj.bias")):
            w = permute(w, cfg.num_attention_heads)
        if arch == "llama" and name.endswith(("k_proj.weight", "k_proj.bias")):
            w = permute(w, cfg.num_key_value_heads)
        name = name.removeprefix("model.")
        if name.startswith("layers."):
            _, i, rest = name.split(".", 2)
            part, kind = rest.rsplit(".", 1)
            out.append((f"blk.{i}.{leaf[part]}.{kind}", w))
        else:
            out.append(({"embed_tokens.weight": "token_embd.weight",
                         "norm.weight": "output_norm.weight"}[name], w))
    return out


def write_gguf(path: Path, arch: str, model, tensors, tok: str, pre, scheme: str) -> None:
    import gguf
    from gguf import GGMLQuantizationType as Q
    cfg = model.config
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"tiny-{arch}-{scheme.lower()}")
    if arch == "gpt2":  # GPT2Model.set_gguf_parameters
        writer.add_block_count(cfg.n_layer)
        writer.add_context_length(cfg.n_positions)
        writer.add_embedding_length(cfg.n_embd)
        writer.add_feed_forward_length(4 * cfg.n_embd)
        writer.add_head_count(cfg.n_head)
        writer.add_layer_norm_eps(cfg.layer_norm_epsilon)
    else:  # TextModel.set_gguf_parameters (+ LlamaModel's vocab size and rope dimension)
        writer.add_context_length(cfg.max_position_embeddings)
        writer.add_embedding_length(cfg.hidden_size)
        writer.add_block_count(cfg.num_hidden_layers)
        writer.add_feed_forward_length(cfg.intermediate_size)
        writer.add_head_count(cfg.num_attention_heads)
        writer.add_head_count_kv(cfg.num_key_value_heads)
        writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        if arch != "gemma":
            writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"] if getattr(cfg, "rope_parameters", None)
                                      else cfg.rope_theta)
        if arch in ("gemma", "qwen3"):
            writer.add_key_length(head_dim)
            writer.add_value_length(head_dim)
        if arch == "llama":
            writer.add_vocab_size(cfg.vocab_size)
            writer.add_rope_dimension_count(head_dim)
    writer.add_file_type(FILE_TYPES[scheme])
    if tok == "spm":
        tokens, scores, types = spm_vocab(arch)
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        if arch == "gemma":
            writer.add_bos_token_id(2), writer.add_eos_token_id(1), writer.add_unk_token_id(3)
            writer.add_pad_token_id(0), writer.add_add_space_prefix(False)
        else:
            writer.add_bos_token_id(1), writer.add_eos_token_id(2), writer.add_unk_token_id(0)
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(False)
    else:
        tokens, types, merges = bpe_vocab()
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(pre)
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        eot = tokens.index("<|endoftext|>")
        writer.add_bos_token_id(eot), writer.add_eos_token_id(eot)
        writer.add_add_bos_token(arch == "llama")   # Llama 3 style files add BOS
    tied = "output.weight" not in {n for n, _ in tensors}
    for name, w in tensors:
        qtype = tensor_type(name, w, scheme, tied)
        data = quantize(w, qtype)
        if qtype in (Q.F32, Q.F16):
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def n_vocab_of(tok: str, arch: str) -> int:
    return len(spm_vocab(arch)[0]) if tok == "spm" else len(bpe_vocab()[0])


def gemma_from_gguf(path: Path, original):
    """transformers reads no Gemma 1 GGUF (its GGUF table lists gemma2/3/4 only): the reference is
    HF's GemmaForCausalLM running the file's dequantized weights, llama.cpp's 1 + w undone here,
    and HF's own GGUF tokenizer builder (the functions from_pretrained(gguf_file=) calls)."""
    import copy

    import gguf
    import torch
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.gguf import convert_gguf_tokenizer, get_gguf_tokenizer
    reader = gguf.GGUFReader(str(path))
    back = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
            "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
            "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
            "ffn_down": "mlp.down_proj"}
    state = {}
    for tensor in reader.tensors:
        w = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        if tensor.name.endswith("norm.weight"):
            w = w - np.float32(1.0)
        if tensor.name.startswith("blk."):
            _, i, leaf, kind = tensor.name.split(".")
            name = f"model.layers.{i}.{back[leaf]}.{kind}"
        else:
            name = {"token_embd.weight": "model.embed_tokens.weight",
                    "output_norm.weight": "model.norm.weight"}[tensor.name]
        state[name] = torch.from_numpy(w.copy())
    model = copy.deepcopy(original)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    model.tie_weights()
    arch, tokenizer_dict, tokenizer_config = get_gguf_tokenizer(str(path))
    backend, _ = convert_gguf_tokenizer(arch, tokenizer_dict)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **{
        k: v for k, v in tokenizer_config.items() if k in ("bos_token", "eos_token", "unk_token",
                                                           "pad_token", "add_bos_token", "add_eos_token")})
    return model.eval(), tokenizer


def hf_reference(folder: Path, file_name: str, original) -> dict[str, np.ndarray]:
    import torch
    import transformers
    if original.config.model_type == "gemma":
        model, tokenizer = gemma_from_gguf(folder / file_name, original)
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=file_name, dtype=torch.float32, attn_implementation="eager").eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=file_name)
    arrays: dict[str, np.ndarray] = {}
    for t, text in enumerate(TOKENIZER_TEXTS):
        arrays[f"tokenizer_text_{t}"] = np.array(text)
        arrays[f"tokenizer_ids_{t}"] = np.asarray(tokenizer(text)["input_ids"], dtype=np.int64)
    with torch.no_grad():
        for t, text in enumerate(TEXTS):
            ids = torch.tensor([tokenizer(text)["input_ids"]])
            out = model(ids, attention_mask=torch.ones_like(ids), output_hidden_states=True,
                        output_attentions=True)
            arrays[f"text_{t}"] = np.array(text)
            arrays[f"input_ids_{t}"] = ids[0].numpy()
            arrays[f"hidden_states_{t}"] = torch.stack(out.hidden_states)[:, 0].numpy()
            arrays[f"attentions_{t}"] = torch.stack(out.attentions)[:, 0].numpy()
            arrays[f"logits_{t}"] = out.logits[0].numpy()
        ids = torch.tensor([tokenizer(TEXTS[0])["input_ids"]])
        generated = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12,
                                   do_sample=False, pad_token_id=tokenizer.eos_token_id)
        arrays["generated_ids_0"] = generated[0].numpy()
    return arrays


def check_against_original(model, arrays: dict, scheme: str, name: str) -> None:
    """The GGUF as HF reads it vs the original fp32 model: close for F16, looser when quantized
    (a check that the file's conventions were followed, not a fixture)."""
    import torch
    with torch.no_grad():
        ids = torch.tensor([arrays["input_ids_2"]])
        logits = model(ids).logits[0].numpy()
    gap = float(np.abs(logits - arrays["logits_2"]).max() / (np.abs(logits).max() + 1e-9))
    print(f"  {name}: HF(GGUF) vs original fp32, largest relative logit gap {gap:.2e}")
    if scheme == "F16":
        assert gap < 5e-3, gap


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="*", help="fixture names to (re)write")
    parser.add_argument("--schemes", nargs="*", help="quant schemes to (re)write (default: all)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for index, (name, (arch, overrides, tok, pre, schemes)) in enumerate(FIXTURES.items()):
        if args.only and name not in args.only:
            continue
        model = hf_model(arch, overrides, n_vocab_of(tok, arch), SEED + index)
        tensors = gguf_tensors(arch, model, model.config)
        for scheme in schemes:
            if args.schemes and scheme not in args.schemes:
                continue
            file_name = f"{name}.{scheme}.gguf"
            write_gguf(args.out / file_name, arch, model, tensors, tok, pre, scheme)
            arrays = hf_reference(args.out, file_name, model)
            check_against_original(model, arrays, scheme, file_name)
            save_npz(args.out / f"{name}.{scheme}.npz", {**arrays, **provenance(),
                                                          "gguf_version": np.array(_gguf_version())})
            print(f"wrote {file_name} ({(args.out / file_name).stat().st_size} bytes)")
    return 0


def _gguf_version() -> str:
    from importlib.metadata import version
    return version("gguf")


if __name__ == "__main__":
    sys.exit(main())
