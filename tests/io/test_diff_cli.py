"""`transformer-stepper diff`: the --json document has the issue's schema, holds the figures of
HF's conventions computed from the two traces (hidden_states[i + 1], the last after the final
norm; KL(p_B || p_A) mean; top-1 fraction), and pairs that cannot be compared end in one
`error:` line naming the token or the tensor. `check` without torch says so in one sentence."""
import json
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.cli import main

GGUF = Path(__file__).resolve().parents[1] / "fixtures" / "gguf"
TEXT = "She went to the bank to deposit money."


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_json_schema_and_values(capsys, tmp_path):
    a, b = GGUF / "llama_small.Q4_0.gguf", GGUF / "llama_small.F16.gguf"
    out = tmp_path / "diff.json"
    code, text, err = run(capsys, "diff", "--model", a, "--against", b, "--text", TEXT, "--json", out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert set(doc) == {"tokens", "embedding", "layers", "output"}
    assert set(doc["embedding"]) == {"hidden_rel", "hidden_cos"}
    assert set(doc["output"]) == {"kl", "top1_agree"}
    assert [set(e) for e in doc["layers"]] == [{"layer", "hidden_rel", "hidden_cos", "attn_rel", "mlp_rel"}] * 2
    ta, tb = load_model(a).trace(TEXT), load_model(b).trace(TEXT)
    assert doc["tokens"] == ta.input_ids.tolist()
    for i, entry in enumerate(doc["layers"]):      # HF's hidden_states[i + 1]; the last after ln_f
        assert entry["hidden_rel"] == pytest.approx(rel(ta.hidden_states[i + 1], tb.hidden_states[i + 1]), rel=1e-9)
        assert entry["attn_rel"] == pytest.approx(rel(ta.layer("attn_out", i), tb.layer("attn_out", i)), rel=1e-9)
        assert entry["mlp_rel"] == pytest.approx(rel(ta.layer("mlp_out", i), tb.layer("mlp_out", i)), rel=1e-9)
    assert doc["layers"][-1]["hidden_rel"] == pytest.approx(rel(ta.arrays["final_ln_out"], tb.arrays["final_ln_out"]))
    top_agree = np.mean(ta.logits.argmax(1) == tb.logits.argmax(1))
    assert doc["output"]["top1_agree"] == pytest.approx(top_agree)
    assert "layer 1" in text and "top-1 agreement" in text and f"wrote {out}" in text


def test_pairs_that_cannot_be_compared_are_refused_in_one_line(capsys, tmp_path):
    f16 = GGUF / "llama_small.F16.gguf"
    code, _, err = run(capsys, "diff", "--model", GGUF / "qwen2_small.Q8_0.gguf", "--against", f16, "--text", TEXT)
    assert code == 2 and "architectures differ" in one_error_line(err) and "attn." in err
    code, _, err = run(capsys, "diff", "--model", GGUF / "llama_k.Q4_K_M.gguf", "--against", f16, "--text", TEXT)
    assert code == 2 and "architectures differ" in one_error_line(err)
    code, _, err = run(capsys, "diff", "--model", f16, "--against", f16, "--text", TEXT, "--json", tmp_path / "x.txt")
    assert code == 2 and "must end in .json" in one_error_line(err)
    code, _, err = run(capsys, "diff", "--model", f16, "--against", tmp_path / "missing", "--text", TEXT)
    assert code == 2 and "missing" in one_error_line(err)


def test_a_model_against_itself(capsys, tmp_path):
    f16 = GGUF / "llama_small.F16.gguf"
    out = tmp_path / "self.json"
    code, _, err = run(capsys, "diff", "--model", f16, "--against", f16, "--text", TEXT, "--json", out, "--weights")
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["output"] == {"kl": 0.0, "top1_agree": 1.0}
    assert all(e["hidden_rel"] == 0.0 and e["attn_rel"] == 0.0 for e in doc["layers"])
    assert set(doc["weights"].values()) == {0.0}


def test_check_without_torch_says_so(tmp_path):
    """The worker in a process whose `import torch` fails: one sentence, nothing raised."""
    from transformer_stepper.io.hf_check import LLAMA_CPP_ABSENT, run_check

    blocker = tmp_path / "blocked"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError(\"No module named 'torch'\")\n")
    trace = load_model(GGUF / "llama_small.F16.gguf").trace(TEXT)
    outcome = run_check(str(GGUF / "llama_small.F16.gguf"), trace, pythonpath=[str(blocker)])
    assert outcome.result is None
    assert "needs torch and transformers" in outcome.reason and "[reference]" in outcome.reason
    lines = outcome.lines()
    assert lines[0] == outcome.reason
    # llama.cpp runs on a GGUF whether or not transformers can (or the check says it is absent)
    assert len(lines) == 2 and (lines[1].startswith("llama.cpp: top-1 agreement") or lines[1] == LLAMA_CPP_ABSENT)


FIXTURES = GGUF.parent


def test_encoder_decoder_json_schema_and_refusals(capsys, tmp_path):
    # T5 against itself: both stacks in the table and the document, every figure 0
    out = tmp_path / "t5.json"
    code, text, _ = run(capsys, "diff", "--model", FIXTURES / "t5_tiny", "--against", FIXTURES / "t5_tiny",
                        "--text", TEXT, "--target", "the bank", "--json", out)
    assert code == 0 and "encoder:" in text and "decoder:" in text and "cross_rel" in text
    doc = json.loads(out.read_text())
    assert set(doc) == {"tokens", "decoder_tokens", "embedding", "encoder_layers", "decoder_embedding",
                        "decoder_layers", "output"}
    model = load_model(FIXTURES / "t5_tiny")
    trace = model.trace(TEXT, "the bank")
    assert doc["tokens"] == trace.encoder.input_ids.tolist()
    assert doc["decoder_tokens"] == trace.decoder.input_ids.tolist()
    assert len(doc["encoder_layers"]) == model.config.encoder.n_layer
    assert len(doc["decoder_layers"]) == model.config.decoder.n_layer
    assert set(doc["decoder_layers"][0]) == {"layer", "hidden_rel", "hidden_cos", "attn_rel", "cross_rel", "mlp_rel"}
    assert all(layer["hidden_rel"] == 0.0 for layer in doc["encoder_layers"] + doc["decoder_layers"])
    # without --target: B's greedy translation is the decoder's input
    code, text, _ = run(capsys, "diff", "--model", FIXTURES / "bart_tiny", "--against", FIXTURES / "bart_tiny",
                        "--text", TEXT)
    assert code == 0 and "B's greedy translation as the target" in text
    # an encoder–decoder against a one-stack model; two of different shapes
    code, _, err = run(capsys, "diff", "--model", FIXTURES / "t5_tiny", "--against", GGUF / "llama_small.F16.gguf",
                       "--text", TEXT)
    assert code != 0 and "is an encoder–decoder and" in one_error_line(err)
    code, _, err = run(capsys, "diff", "--model", FIXTURES / "t5_tiny", "--against", FIXTURES / "t5_v11_tiny",
                       "--text", TEXT)
    assert code != 0 and "the architectures differ" in one_error_line(err)
    code, _, err = run(capsys, "diff", "--model", GGUF / "llama_small.F16.gguf", "--against",
                       GGUF / "llama_small.Q8_0.gguf", "--text", TEXT, "--target", "x")
    assert code != 0 and "--target: only for encoder–decoders" in one_error_line(err)
