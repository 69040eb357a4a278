"""The app's next-token predictions against llama.cpp's own (llama-cpp-python, run in a process of
its own by io/hf_check.llama_cpp_logits, as the check runs it) on the committed GGUF fixtures:
the top-1 token equal at every position, for the dense files and the mixture-of-experts files
llama.cpp loads; a file llama.cpp refuses is a sentence naming the file, not a crash; the check
(`transformer-stepper check`) reports llama.cpp's agreement. Skipped where llama-cpp-python is
not installed (CI does not install it)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from transformer_stepper import load_model
from transformer_stepper.core.analysis.reference_check import logits_agreement
from transformer_stepper.io.hf_check import llama_cpp_logits

pytestmark = [pytest.mark.reference,
              pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                 reason="llama-cpp-python is not installed")]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEXT = "She went to the bank to deposit money, and then walked along the river bank."

# llama.cpp computes these files' products in float32 or float16 (no 8-bit activations), so its
# logits are the dequantized model's to float32 rounding
EXACT = ["gguf/llama_small.F16", "gguf_moe/mixtral_tiny.F32", "gguf_moe/qwen2_moe_tiny.F32",
         "gguf_moe/olmoe_tiny.F32"]


def _compare(name: str):
    path = FIXTURES / f"{name}.gguf"
    trace = load_model(path).trace(TEXT)
    theirs, why = llama_cpp_logits(path, trace.input_ids)
    assert theirs is not None, why
    return trace.logits, theirs


@pytest.mark.parametrize("name", EXACT)
def test_top1_equals_llama_cpp_at_every_position(name):
    ours, theirs = _compare(name)
    agreement = logits_agreement(ours, theirs)
    assert agreement.top1_agree == 1.0, np.flatnonzero(ours.argmax(1) != theirs.argmax(1))
    assert agreement.correlation > 0.99999
    assert agreement.max_abs < 1e-2 * np.abs(ours).max()


def test_gpt_oss_top1_equals_llama_cpp_at_every_position():
    # gpt-oss in float32: llama.cpp keeps K and V in float16 in its cache, which with the sinks
    # and this fixture's sharp logits moves them by up to ~1 % of their range (measured: r
    # 0.99998, the largest gap 0.085): the top-1 token is still equal at every position
    ours, theirs = _compare("gguf_moe/gpt_oss_tiny.F32")
    agreement = logits_agreement(ours, theirs)
    assert agreement.top1_agree == 1.0, np.flatnonzero(ours.argmax(1) != theirs.argmax(1))
    assert agreement.correlation > 0.9999
    assert agreement.max_abs < 0.02 * (ours.max() - ours.min())


# llama.cpp rounds the activations to 8 bits inside its quantized products (and keeps K and V in
# float16): its logits differ from the dequantized model's by up to a few percent of their range,
# and where the top two are that close the argmax can flip (measured on this text: r >= 0.9996,
# top-1 >= 92.9 %, the flips at positions whose top-2 margin is under the gap). A wrong weight
# layout (q/k rows left permuted, a block decoded wrong) gives r far below these bounds.
QUANTIZED = ["gguf/gpt2_small.Q4_0", "gguf/llama_small.Q8_0", "gguf/llama_small.Q4_0",
             "gguf/llama_small.IQ4_NL", "gguf/llama_small.MXFP4", "gguf/llama_k.Q2_K",
             "gguf/llama_k.Q3_K_M", "gguf/llama_k.Q4_K_M", "gguf/llama_k.Q5_K_M", "gguf/llama_k.IQ4_XS",
             "gguf/qwen2_small.Q8_0", "gguf/qwen3_k.Q4_K_M", "gguf/gemma_k.Q6_K",
             "gguf_moe/gpt_oss_tiny.MXFP4"]


@pytest.mark.parametrize("name", QUANTIZED)
def test_quantized_files_agree_with_llama_cpp_up_to_its_8_bit_activations(name):
    ours, theirs = _compare(name)
    agreement = logits_agreement(ours, theirs)
    assert agreement.correlation > 0.999
    assert agreement.top1_agree >= 0.9
    assert agreement.max_abs < 0.05 * (ours.max() - ours.min())


def test_a_file_llama_cpp_refuses_is_a_sentence_naming_why():
    # llama.cpp's qwen3moe reads a router in every layer; this fixture copies Qwen3-MoE's
    # mlp_only_layers (a dense layer 1), which transformers and the app run
    path = FIXTURES / "gguf_moe" / "qwen3_moe_tiny.F32.gguf"
    logits, why = llama_cpp_logits(path, [1, 2, 3])
    assert logits is None
    assert str(path) in why and "blk.1.ffn_gate_inp.weight" in why and "Traceback" not in why


def test_llama_cpp_takes_only_a_27_layer_deepseek2_file_as_v2_lite():
    # llama.cpp tells DeepSeek-V2-Lite (no q latent: q_lora_rank absent) by its 27 layers and
    # otherwise requires deepseek2.attention.q_lora_rank; this 3-layer fixture copies V2-Lite's
    # config, which transformers and the app run
    path = FIXTURES / "gguf_moe" / "deepseek_v2_tiny.F32.gguf"
    logits, why = llama_cpp_logits(path, [1, 2, 3])
    assert logits is None
    assert str(path) in why and "q_lora_rank" in why and "Traceback" not in why


def test_the_check_reports_llama_cpps_agreement(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformer_stepper.cli import main

    code = main(["check", "--model", str(FIXTURES / "gguf" / "llama_small.F16.gguf"), "--text", TEXT])
    out = capsys.readouterr().out
    assert code == 0, out
    line = next(line for line in out.splitlines() if line.startswith("llama.cpp:"))
    assert "top-1 agreement 100.0 %" in line
    assert float(line.split("correlation ")[1].split(",")[0]) > 0.99999


def test_llama_cpp_runs_where_transformers_cannot_read_the_file(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformer_stepper.cli import main

    code = main(["check", "--model", str(FIXTURES / "gguf" / "gemma_k.Q6_K.gguf"), "--text", TEXT])
    out = capsys.readouterr().out
    assert code == 3 and "transformers cannot run" in out
    assert any(line.startswith("llama.cpp: top-1 agreement") for line in out.splitlines())
