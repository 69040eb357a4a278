"""Mixture-of-experts GGUF fixtures (tests/fixtures/gguf_moe/): the committed Hugging Face MoE
fixtures (tests/make_moe_fixtures.py) written as GGUF with gguf-py's GGUFWriter following
llama.cpp's convert_hf_to_gguf.py: the experts of a layer stacked into one 3-D tensor each
(ffn_gate_exps, ffn_up_exps [n_expert, d_expert, d_model], ffn_down_exps [n_expert, d_model,
d_expert]), the router as ffn_gate_inp, a dense layer's feed-forward as ffn_gate/up/down,
{arch}.expert_count, expert_used_count, expert_feed_forward_length; Mixtral as `llama` with its
q/k rows permuted for llama.cpp's rotary.

    python tests/make_moe_gguf_fixtures.py [--only FIXTURE ...]

Files: qwen3_moe_tiny.F32.gguf (the fixture's weights as they are: its HF reference,
hf_outputs/qwen3_moe_tiny.npz, is the GGUF's), qwen3_moe_tiny.Q8_0.gguf (every 2-D/3-D
tensor whose rows are a multiple of 32 wide in Q8_0, the rest F32) with
qwen3_moe_tiny.Q8_0.npz: transformers' Qwen3MoeForCausalLM run with the GGUF's weights
dequantized by gguf.quants (hidden_states_t, logits_t, expert_ids_t for the texts' ids), and
mixtral_tiny.F32.gguf, qwen2_moe_tiny.F32.gguf (the shared expert as ffn_*_shexp, its gate
ffn_gate_inp_shexp [d_model]), olmoe_tiny.F32.gguf and deepseek_v2_tiny.F32.gguf (`deepseek2`:
attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b as llama.cpp's converter wrote them before splitting
attn_kv_b, the shared experts as ffn_*_shexp, leading_dense_block_count, yarn_log_multiplier). The tokenizer metadata is the fixture's own vocabulary (byte-level BPE
for Qwen3-MoE, Qwen2-MoE and OLMoE; Mixtral's Metaspace BPE written as llama.cpp's `llama` model with scores
-id): the reference tests feed the HF reference's ids.

gpt-oss (`gpt-oss`, llama.cpp's GptOssModel converter): post_attention_layernorm as
post_attention_norm, the sinks as attn_sinks.weight, the router and its bias as ffn_gate_inp,
the fused experts split as the converter splits them (gate the even rows of gate_up_proj
transposed, up the odd ones: ffn_gate_exps, ffn_up_exps [n_expert, d_expert, d_model] with
their biases [n_expert, d_expert]; ffn_down_exps [n_expert, d_model, d_expert]),
expert_feed_forward_length, attention.sliding_window, rope.scaling yarn. gpt_oss_tiny.F32.gguf
holds the weights as they are; gpt_oss_tiny.MXFP4.gguf the three expert tensors of each layer
in MXFP4 (tests/gguf_packers.py, the rest F32) with gpt_oss_tiny.MXFP4.npz: transformers'
GptOssForCausalLM with those experts dequantized by gguf.quants."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_fixtures import provenance, save_npz  # noqa: E402
from make_gguf_fixtures import permute  # noqa: E402

OUT = HERE / "fixtures" / "gguf_moe"
FIXTURES = HERE / "fixtures"


def _state(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file
    return {k.removeprefix("model."): v.astype(np.float32) for k, v in load_file(folder / "model.safetensors").items()}


_LEAF = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
         "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
         "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "mlp.gate": "ffn_gate_inp", "block_sparse_moe.gate": "ffn_gate_inp",
         "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
         "mlp.shared_expert.down_proj": "ffn_down_shexp", "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
         # DeepSeek-V2's latent attention (llama.cpp's convert before it split attn_kv_b) and shared experts
         "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa", "self_attn.kv_a_layernorm": "attn_kv_a_norm",
         "self_attn.kv_b_proj": "attn_kv_b", "self_attn.q_a_proj": "attn_q_a",
         "self_attn.q_a_layernorm": "attn_q_a_norm", "self_attn.q_b_proj": "attn_q_b",
         "mlp.shared_experts.gate_proj": "ffn_gate_shexp", "mlp.shared_experts.up_proj": "ffn_up_shexp",
         "mlp.shared_experts.down_proj": "ffn_down_shexp"}
_EXPERT_LEAF = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps",
                "w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"}


def gguf_tensors(state: dict, cfg: dict, mixtral: bool) -> list[tuple[str, np.ndarray]]:
    out, experts = [], {}
    for name, w in state.items():
        if name == "lm_head.weight":
            out.append(("output.weight", w))
            continue
        if not name.startswith("layers."):
            out.append(({"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}[name], w))
            continue
        _, i, rest = name.split(".", 2)
        if ".experts." in rest:                       # mlp.experts.{e}.gate_proj.weight
            e, projection = rest.split(".experts.")[1].split(".")[:2]
            experts.setdefault((i, _EXPERT_LEAF[projection]), {})[int(e)] = w
            continue
        part, kind = rest.rsplit(".", 1)
        if mixtral and part == "self_attn.q_proj":
            w = permute(w, cfg["num_attention_heads"])
        if mixtral and part == "self_attn.k_proj":
            w = permute(w, cfg["num_key_value_heads"])
        if part == "mlp.shared_expert_gate":         # llama.cpp's {n_embd}
            w = w.reshape(-1)
        out.append((f"blk.{i}.{_LEAF[part]}.{kind}", w))
    for (i, leaf), by_expert in sorted(experts.items()):
        out.append((f"blk.{i}.{leaf}.weight", np.stack([by_expert[e] for e in sorted(by_expert)])))
    return out


def write(path: Path, arch: str, cfg: dict, tensors, tokenizer_file: Path, scheme: str) -> None:
    import gguf
    from gguf import GGMLQuantizationType as Q
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(path.stem)
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"] if "rope_parameters" in cfg else cfg["rope_theta"])
    if arch == "deepseek2":
        _deepseek2(writer, cfg)
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if arch == "qwen3moe":
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    if arch in ("qwen3moe", "qwen2moe"):
        writer.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if arch == "qwen2moe":
        writer.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    if arch == "llama":
        writer.add_vocab_size(cfg["vocab_size"])
        writer.add_rope_dimension_count(head_dim)
    writer.add_expert_count(cfg.get("num_experts") or cfg.get("num_local_experts") or cfg["n_routed_experts"])
    writer.add_expert_used_count(cfg["num_experts_per_tok"])
    writer.add_file_type({"F32": 0, "Q8_0": 7}[scheme])
    _tokenizer(writer, tokenizer_file, arch)
    for name, w in tensors:
        qtype = Q.Q8_0 if scheme == "Q8_0" and w.ndim > 1 and w.shape[-1] % 32 == 0 else Q.F32
        data = gguf.quants.quantize(w, qtype)
        if qtype == Q.F32:
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _deepseek2(writer, cfg: dict) -> None:
    """DeepSeek-V2's keys as llama.cpp's convert_hf_to_gguf.py wrote them before it split attn_kv_b
    into attn_k_b / attn_v_b: key_length = qk_nope + qk_rope, value_length = v_head_dim."""
    import gguf
    writer.add_vocab_size(cfg["vocab_size"])
    writer.add_leading_dense_block_count(cfg["first_k_dense_replace"])
    if cfg.get("q_lora_rank") is not None:
        writer.add_q_lora_rank(cfg["q_lora_rank"])
    writer.add_kv_lora_rank(cfg["kv_lora_rank"])
    writer.add_key_length(cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
    writer.add_value_length(cfg["v_head_dim"])
    writer.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    writer.add_expert_shared_count(cfg["n_shared_experts"])
    writer.add_expert_weights_scale(cfg["routed_scaling_factor"])
    writer.add_expert_weights_norm(cfg["norm_topk_prob"])
    writer.add_expert_gating_func(gguf.ExpertGatingFuncType.SOFTMAX)
    writer.add_rope_dimension_count(cfg["qk_rope_head_dim"])
    yarn = cfg["rope_scaling"]
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(yarn["factor"])
    writer.add_rope_scaling_orig_ctx_len(yarn["original_max_position_embeddings"])
    writer.add_rope_scaling_yarn_log_mul(0.1 * yarn["mscale_all_dim"])


def _tokenizer(writer, tokenizer_file: Path, arch: str) -> None:
    doc = json.loads(tokenizer_file.read_text(encoding="utf-8"))
    vocab = {**doc["model"]["vocab"], **{t["content"]: t["id"] for t in doc.get("added_tokens", [])}}
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    specials = {t["content"] for t in doc.get("added_tokens", [])}
    types = [3 if t in specials else 1 for t in tokens]
    if arch != "llama":
        merges = [" ".join(m) if isinstance(m, list) else m for m in doc["model"]["merges"]]
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("qwen2")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        if arch == "deepseek2":
            writer.add_bos_token_id(tokens.index("<｜begin▁of▁sentence｜>"))
            writer.add_eos_token_id(tokens.index("<｜end▁of▁sentence｜>"))
            writer.add_add_bos_token(True)
        else:
            eot = tokens.index("<|endoftext|>")
            writer.add_bos_token_id(eot), writer.add_eos_token_id(eot)
            writer.add_add_bos_token(False)
    else:
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores([0.0 if t == 3 else -float(i) for i, t in enumerate(types)])
        writer.add_token_types([2 if tok == "<unk>" else t for tok, t in zip(tokens, types)])
        writer.add_bos_token_id(tokens.index("<s>")), writer.add_eos_token_id(tokens.index("</s>"))
        writer.add_unk_token_id(tokens.index("<unk>"))
        writer.add_add_bos_token(True)


def dequantized_reference(folder: Path, gguf_path: Path, tensors, name_map, reference: dict) -> dict:
    """transformers' model of `folder` with every weight replaced by the GGUF's, dequantized by
    gguf.quants: hidden states, logits and each MoE layer's expert ids for the reference ids."""
    import torch
    import gguf
    import make_fixtures as mf

    model = mf.load_eager(folder, "Qwen3MoeForCausalLM")
    reader = gguf.GGUFReader(str(gguf_path))
    stored = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).reshape(
        tuple(int(d) for d in reversed(t.shape.tolist()))) for t in reader.tensors}
    state = {}
    for hf, (gguf_name, expert) in name_map.items():
        value = stored[gguf_name] if expert is None else stored[gguf_name][expert]
        state[hf] = torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))
    return reference_arrays(_load_legacy(model, state), reference)


def reference_arrays(model, reference: dict) -> dict:
    """transformers' hidden states, logits and chosen experts on the reference's three texts."""
    import torch
    from make_moe_fixtures import routing

    arrays = {}
    for t in range(3):
        ids = reference[f"input_ids_{t}"]
        with torch.no_grad():
            out = model(input_ids=torch.from_numpy(ids)[None], output_hidden_states=True)
        arrays[f"input_ids_{t}"] = ids
        arrays[f"hidden_states_{t}"] = torch.stack(out.hidden_states)[:, 0].numpy()
        arrays[f"logits_{t}"] = out.logits[0].numpy()
        arrays[f"expert_ids_{t}"] = routing(model, ids)["expert_ids"]
    return arrays


def _load_legacy(model, state: dict):
    """The weights in the checkpoint's per-expert names put into transformers 5's fused experts."""
    import torch
    with torch.no_grad():
        params = dict(model.named_parameters())
        for i, layer in enumerate(model.model.layers):
            experts = getattr(layer.mlp, "experts", None)
            if experts is None:
                continue
            n = experts.gate_up_proj.shape[0]
            p = f"model.layers.{i}.mlp.experts."
            gate_up = torch.stack([torch.cat([state.pop(f"{p}{e}.gate_proj.weight"), state.pop(f"{p}{e}.up_proj.weight")])
                                   for e in range(n)])
            experts.gate_up_proj.copy_(gate_up)
            experts.down_proj.copy_(torch.stack([state.pop(f"{p}{e}.down_proj.weight") for e in range(n)]))
        for name, value in state.items():
            params[name].copy_(value)
    return model


def name_map(tensors, state_names, mixtral: bool) -> dict:
    """HF name -> (GGUF name, expert or None), the inverse of gguf_tensors."""
    inverse = {v: k for k, v in _LEAF.items() if k != ("mlp.gate" if mixtral else "block_sparse_moe.gate")}
    out = {}
    for gguf_name, w in tensors:
        if gguf_name in ("token_embd.weight", "output_norm.weight", "output.weight"):
            out[{"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                 "output.weight": "lm_head.weight"}[gguf_name]] = (gguf_name, None)
            continue
        _, i, leaf, _ = gguf_name.split(".")
        if leaf.endswith("_exps"):
            projection = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}[leaf]
            for e in range(w.shape[0]):
                out[f"model.layers.{i}.mlp.experts.{e}.{projection}.weight"] = (gguf_name, e)
        else:
            out[f"model.layers.{i}.{inverse[leaf]}.weight"] = (gguf_name, None)
    assert set(out) == {"model." + n if n != "lm_head.weight" else n for n in state_names}, "names"
    return out


def gpt_oss_tensors(state: dict) -> list[tuple[str, np.ndarray]]:
    """The HF gpt-oss state as llama.cpp's converter names and splits it."""
    leaf = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
            "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.o_proj": "attn_output", "mlp.router": "ffn_gate_inp"}
    top = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    out = []
    for name, w in state.items():
        if name in top:
            out.append((top[name], w))
            continue
        _, i, rest = name.split(".", 2)
        p = f"blk.{i}."
        if rest == "self_attn.sinks":
            out.append((p + "attn_sinks.weight", w))
        elif rest == "mlp.experts.gate_up_proj":              # [E, d, 2f] -> [E, 2f, d], split
            rows = np.ascontiguousarray(w.transpose(0, 2, 1))
            out += [(p + "ffn_gate_exps.weight", rows[:, ::2]), (p + "ffn_up_exps.weight", rows[:, 1::2])]
        elif rest == "mlp.experts.gate_up_proj_bias":
            out += [(p + "ffn_gate_exps.bias", w[:, ::2]), (p + "ffn_up_exps.bias", w[:, 1::2])]
        elif rest == "mlp.experts.down_proj":
            out.append((p + "ffn_down_exps.weight", w.transpose(0, 2, 1)))
        elif rest == "mlp.experts.down_proj_bias":
            out.append((p + "ffn_down_exps.bias", w))
        else:
            part, kind = rest.rsplit(".", 1)
            out.append((f"{p}{leaf[part]}.{kind}", w))
    return [(name, np.ascontiguousarray(w, dtype=np.float32)) for name, w in out]


def write_gpt_oss(path: Path, cfg: dict, tensors, tokenizer_file: Path, scheme: str) -> None:
    """A gpt-oss GGUF with llama.cpp's metadata; MXFP4: the experts' 3-D weights in MXFP4 blocks
    written by the project's packer (tests/gguf_packers.py)."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf_packers import pack
    arch = "gpt-oss"
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(path.stem)
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_key_length(cfg["head_dim"])
    writer.add_value_length(cfg["head_dim"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_rope_freq_base(cfg["rope_theta"])
    writer.add_sliding_window(cfg["sliding_window"])
    writer.add_expert_count(cfg["num_local_experts"])
    writer.add_expert_used_count(cfg["num_experts_per_tok"])
    writer.add_expert_feed_forward_length(cfg["intermediate_size"])
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(cfg["rope_scaling"]["factor"])
    writer.add_rope_scaling_orig_ctx_len(cfg["rope_scaling"]["original_max_position_embeddings"])
    writer.add_file_type({"F32": 0, "MXFP4": 38}[scheme])
    _tokenizer(writer, tokenizer_file, arch)
    for name, w in tensors:
        if scheme == "MXFP4" and name.endswith("_exps.weight"):
            data = pack(w, "MXFP4")
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=Q.MXFP4)
        else:
            writer.add_tensor(name, w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def gpt_oss_dequantized_reference(folder: Path, gguf_path: Path, reference: dict) -> dict:
    """transformers' gpt-oss of `folder` with each layer's experts replaced by the GGUF's,
    dequantized by gguf.quants and fused back (gate_up_proj interleaved): hidden states, logits
    and expert ids for the reference ids."""
    import torch
    import gguf
    from make_moe_fixtures import load

    model = load(folder, "GptOssForCausalLM")
    reader = gguf.GGUFReader(str(gguf_path))
    stored = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).reshape(
        tuple(int(d) for d in reversed(t.shape.tolist()))) for t in reader.tensors}
    with torch.no_grad():
        for i, layer in enumerate(model.model.layers):
            gate, up = stored[f"blk.{i}.ffn_gate_exps.weight"], stored[f"blk.{i}.ffn_up_exps.weight"]
            fused = np.empty((gate.shape[0], 2 * gate.shape[1], gate.shape[2]), dtype=np.float32)
            fused[:, ::2], fused[:, 1::2] = gate, up
            layer.mlp.experts.gate_up_proj.copy_(torch.from_numpy(fused.transpose(0, 2, 1).copy()))
            down = stored[f"blk.{i}.ffn_down_exps.weight"].transpose(0, 2, 1).copy()
            layer.mlp.experts.down_proj.copy_(torch.from_numpy(down))
    return reference_arrays(model, reference)


def make_gpt_oss() -> None:
    folder = FIXTURES / "gpt_oss_tiny"
    cfg = json.loads((folder / "config.json").read_text())
    tensors = gpt_oss_tensors(_state(folder))
    for scheme in ("F32", "MXFP4"):
        path = OUT / f"gpt_oss_tiny.{scheme}.gguf"
        write_gpt_oss(path, cfg, tensors, folder / "tokenizer.json", scheme)
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    reference = dict(np.load(FIXTURES / "hf_outputs" / "gpt_oss_tiny.npz"))
    arrays = gpt_oss_dequantized_reference(folder, OUT / "gpt_oss_tiny.MXFP4.gguf", reference)
    save_npz(OUT / "gpt_oss_tiny.MXFP4.npz", {**arrays, **provenance()})


def main(argv=None) -> int:
    import argparse

    import torch
    import transformers
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="FIXTURE")
    parser.add_argument("--only-gpt-oss", action="store_true", help="only gpt_oss_tiny's two files")
    args = parser.parse_args(argv)
    only = ["gpt_oss_tiny"] if args.only_gpt_oss else args.only
    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    OUT.mkdir(parents=True, exist_ok=True)
    if not only or "gpt_oss_tiny" in only:
        make_gpt_oss()
    for fixture, arch, schemes in (("qwen3_moe_tiny", "qwen3moe", ("F32", "Q8_0")), ("mixtral_tiny", "llama", ("F32",)),
                                   ("qwen2_moe_tiny", "qwen2moe", ("F32",)), ("olmoe_tiny", "olmoe", ("F32",)),
                                   ("deepseek_v2_tiny", "deepseek2", ("F32",))):
        if only and fixture not in only:
            continue
        folder = FIXTURES / fixture
        cfg = json.loads((folder / "config.json").read_text())
        state = _state(folder)
        tensors = gguf_tensors(state, cfg, arch == "llama")
        for scheme in schemes:
            path = OUT / f"{fixture}.{scheme}.gguf"
            write(path, arch, cfg, tensors, folder / "tokenizer.json", scheme)
            print(f"wrote {path} ({path.stat().st_size} bytes)")
            if scheme == "Q8_0":
                reference = dict(np.load(FIXTURES / "hf_outputs" / f"{fixture}.npz"))
                arrays = dequantized_reference(folder, path, tensors, name_map(tensors, state, False), reference)
                save_npz(OUT / f"{fixture}.{scheme}.npz", {**arrays, **provenance()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
