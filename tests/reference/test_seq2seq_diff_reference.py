"""`transformer-stepper diff` of two encoder–decoders (core/analysis/seq2seq_diff.py) against the
same figures computed from Hugging Face's arrays of both models (relative 1e-3): the T5, BART
and Marian fixtures as A, and B = the same checkpoint with every weight moved by 2 % noise,
saved by transformers. Per stack and layer: hidden_rel and hidden_cos of HF's
encoder_hidden_states / decoder_hidden_states, attn_rel, cross_rel and mlp_rel of the
self-attention's, cross-attention's and feed-forward's outputs (forward hooks), and at the
output KL(p_B ‖ p_A) and top-1 agreement. A model against itself gives 0 and KL 0 exactly."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import model_diff_helpers as ref
from transformer_stepper.cli import main

pytestmark = pytest.mark.reference
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RTOL = 1e-3
SOURCE, TARGET = "The bank of the river is near the money.", "the river bank"


def perturbed_copy(folder: Path, out: Path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(36)
    with torch.no_grad():
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.add_(0.02 * parameter.abs().mean() * noise)
    model.save_pretrained(out, safe_serialization=True)
    for item in folder.iterdir():
        if item.is_file() and not item.name.endswith(".safetensors") and item.name != "config.json":
            shutil.copy(item, out / item.name)
    return out


def blocks(model):
    """Per stack, per layer: (self-attention, cross-attention or None, feed-forward output module)."""
    if hasattr(model, "encoder") and hasattr(model.encoder, "block"):         # T5
        def t5(block, decoder):
            return (block.layer[0].SelfAttention, block.layer[1].EncDecAttention if decoder else None,
                    block.layer[-1].DenseReluDense)
        return ([t5(b, False) for b in model.encoder.block], [t5(b, True) for b in model.decoder.block])
    inner = model.model
    return ([(l.self_attn, None, l.fc2) for l in inner.encoder.layers],
            [(l.self_attn, l.encoder_attn, l.fc2) for l in inner.decoder.layers])


def hf_figures(folder: Path, source_ids, decoder_ids) -> dict:
    import torch
    import transformers

    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager").eval()
    seen = {}

    def keep(key):
        def hook(module, args, output):
            value = output[0] if isinstance(output, tuple) else output
            seen[key] = value[0].detach().numpy().copy()
        return hook

    hooks = []
    for stack, layers in zip(("encoder", "decoder"), blocks(model)):
        for i, (attn, cross, mlp) in enumerate(layers):
            hooks += [attn.register_forward_hook(keep((stack, "attn", i))),
                      mlp.register_forward_hook(keep((stack, "mlp", i)))]
            if cross is not None:
                hooks.append(cross.register_forward_hook(keep((stack, "cross", i))))
    with torch.no_grad():
        out = model(input_ids=torch.tensor([source_ids]), decoder_input_ids=torch.tensor([decoder_ids]),
                    output_hidden_states=True)
    for hook in hooks:
        hook.remove()
    seen["encoder_hidden"] = [h[0].numpy() for h in out.encoder_hidden_states]
    seen["decoder_hidden"] = [h[0].numpy() for h in out.decoder_hidden_states]
    seen["logits"] = out.logits[0].numpy()
    return seen


def run_diff(a: Path, b: Path, out: Path) -> dict:
    code = main(["diff", "--model", str(a), "--against", str(b), "--text", SOURCE, "--target", TARGET,
                 "--json", str(out)])
    assert code == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", ["t5_tiny", "bart_tiny", "marian_tiny"])
def test_encoder_decoder_diff_equals_hugging_faces(name, tmp_path):
    a = FIXTURES / name
    b = perturbed_copy(a, tmp_path / "b")
    doc = run_diff(a, b, tmp_path / "diff.json")
    hf_a = hf_figures(a, doc["tokens"], doc["decoder_tokens"])
    hf_b = hf_figures(b, doc["tokens"], doc["decoder_tokens"])
    for stack, embedding, layers in (("encoder", doc["embedding"], doc["encoder_layers"]),
                                     ("decoder", doc["decoder_embedding"], doc["decoder_layers"])):
        ha, hb = hf_a[f"{stack}_hidden"], hf_b[f"{stack}_hidden"]
        assert embedding["hidden_rel"] == pytest.approx(ref.rel(ha[0], hb[0]), rel=RTOL), stack
        assert len(layers) == len(ha) - 1
        for i, layer in enumerate(layers):
            where = (name, stack, i)
            assert layer["hidden_rel"] == pytest.approx(ref.rel(ha[i + 1], hb[i + 1]), rel=RTOL), where
            assert layer["hidden_cos"] == pytest.approx(ref.cos(ha[i + 1], hb[i + 1]), rel=RTOL), where
            parts = (("attn_rel", "attn"), ("mlp_rel", "mlp")) + ((("cross_rel", "cross"),) if stack == "decoder" else ())
            for key, part in parts:
                want = ref.rel(hf_a[(stack, part, i)], hf_b[(stack, part, i)])      # (every hook ran)
                assert layer[key] == pytest.approx(want, rel=RTOL), (where, key)
            assert layer["hidden_rel"] > 0
        assert ("cross_rel" in layers[0]) == (stack == "decoder")
    la, lb = hf_a["logits"], hf_b["logits"]
    assert doc["output"]["kl"] == pytest.approx(ref.kl_b_a(la, lb).mean(), rel=RTOL)
    assert doc["output"]["top1_agree"] == np.mean(la.argmax(1) == lb.argmax(1))


def test_an_encoder_decoder_against_itself_is_zero(tmp_path):
    doc = run_diff(FIXTURES / "bart_tiny", FIXTURES / "bart_tiny", tmp_path / "same.json")
    for layers in (doc["encoder_layers"], doc["decoder_layers"]):
        for layer in layers:
            assert layer["hidden_rel"] == 0.0 and layer["attn_rel"] == 0.0 and layer["mlp_rel"] == 0.0
    assert all(layer["cross_rel"] == 0.0 for layer in doc["decoder_layers"])
    assert doc["output"] == {"kl": 0.0, "top1_agree": 1.0}
