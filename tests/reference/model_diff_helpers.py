"""The model diff's figures computed a second way, from Hugging Face's arrays of both models
(numpy, float64, written from the definitions, not with core/analysis/model_diff.py), and the live
tier's GGUF triplets: one tiny random Llama written as F16, Q8_0 and Q4_K_M by
tests/make_gguf_fixtures.py's writer and packers, with HF's activations of each file.

No torch at import: the committed tier runs on the app's own dependencies."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1]


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def cos(a, b) -> float:
    """a, b: [n_seq, d] -> the mean over rows of the cosine."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.mean((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))


def per_query(weights) -> np.ndarray:
    """[n_head, n_q, n_k] -> [n_q, n_head * n_k] (a query's rows of every head side by side)."""
    w = np.asarray(weights)
    return w.transpose(1, 0, 2).reshape(w.shape[1], -1)


def js_per_head(p, q) -> np.ndarray:
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_pm = np.where(p > 0, p * np.log(p / m), 0).sum(-1)
        kl_qm = np.where(q > 0, q * np.log(q / m), 0).sum(-1)
    return (0.5 * kl_pm + 0.5 * kl_qm).mean(-1)


def kl_b_a(logits_a, logits_b) -> np.ndarray:
    """[n_seq] KL(p_B || p_A) in nats."""
    def log_p(x):
        x = np.asarray(x, np.float64)
        x = x - x.max(1, keepdims=True)
        return x - np.log(np.exp(x).sum(1, keepdims=True))
    la, lb = log_p(logits_a), log_p(logits_b)
    return (np.exp(lb) * (lb - la)).sum(1)


# ------------------------------------------------------------------ the live tier's triplet
DEEP = dict(hidden_size=256, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
            num_hidden_layers=4, rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
SCHEMES = ("F16", "Q8_0", "Q4_K_M")
SEED = 2036


def fixture_script():
    path = TESTS / "make_gguf_fixtures.py"
    spec = importlib.util.spec_from_file_location("make_gguf_fixtures_diff", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_triplet(folder: Path, n_layer: int = DEEP["num_hidden_layers"],
                  schemes=SCHEMES, hf_folder: bool = False) -> dict[str, Path]:
    """One random Llama (4 layers of 256: K-quant rows) as F16, Q8_0 and Q4_K_M GGUFs (and,
    with hf_folder, as the fp32 Hugging Face folder it came from: paths["HF"])."""
    script = fixture_script()
    model = script.hf_model("llama", {**DEEP, "num_hidden_layers": n_layer}, script.n_vocab_of("spm", "llama"), SEED)
    tensors = script.gguf_tensors("llama", model, model.config)
    paths = {}
    for scheme in schemes:
        paths[scheme] = folder / f"llama_deep.{scheme}.gguf"
        script.write_gguf(paths[scheme], "llama", model, tensors, "spm", None, scheme)
    if hf_folder:      # the same weights in fp32 as a Hugging Face folder, the GGUF's tokenizer
        import transformers

        paths["HF"] = folder / "llama_deep_hf"
        model.save_pretrained(paths["HF"], safe_serialization=True)
        first = paths[schemes[0]]
        tokenizer = transformers.AutoTokenizer.from_pretrained(first.parent, gguf_file=first.name)
        tokenizer.save_pretrained(paths["HF"])
    return paths


def hf_activations(path: Path, input_ids) -> dict:
    """HF's own GGUF loading (its dequantized weights, fp32, eager) run on `input_ids`: per layer
    q, k, v (as projected), the attention weights, the head outputs (o_proj's input), attn_out,
    the stream after attention, mlp_out and the block's output; hidden_states and logits."""
    import torch
    import transformers

    where = {"pretrained_model_name_or_path": path} if path.is_dir() else \
        {"pretrained_model_name_or_path": path.parent, "gguf_file": path.name}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        **where, dtype=torch.float32, attn_implementation="eager").eval()
    seen: dict = {}
    hooks = []

    def keep(name, layer, use_input=False):
        def hook(module, args, output):
            value = args[0] if use_input else (output[0] if isinstance(output, tuple) else output)
            seen[(name, layer)] = value[0].detach().numpy().copy()
        return hook

    for i, block in enumerate(model.model.layers):
        attn = block.self_attn
        hooks += [attn.q_proj.register_forward_hook(keep("q", i)), attn.k_proj.register_forward_hook(keep("k", i)),
                  attn.v_proj.register_forward_hook(keep("v", i)),
                  attn.o_proj.register_forward_hook(keep("head_outputs", i, use_input=True)),
                  attn.o_proj.register_forward_hook(keep("attn_out", i)), block.mlp.register_forward_hook(keep("mlp_out", i)),
                  block.register_forward_hook(keep("layer_out", i)),
                  block.post_attention_layernorm.register_forward_hook(keep("attn_residual", i, use_input=True))]
    with torch.no_grad():
        ids = torch.tensor([list(input_ids)])
        out = model(ids, attention_mask=torch.ones_like(ids), output_hidden_states=True, output_attentions=True)
    for hook in hooks:
        hook.remove()
    for i, weights in enumerate(out.attentions):
        seen[("attn_weights", i)] = weights[0].numpy()
    seen["hidden_states"] = torch.stack(out.hidden_states)[:, 0].numpy()
    seen["logits"] = out.logits[0].numpy()
    return seen
