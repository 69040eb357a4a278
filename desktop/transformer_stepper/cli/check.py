"""`transformer-stepper check --model PATH --text TEXT`: the app's trace of the text checked
against Hugging Face transformers run on the same ids in a process of its own (for a GGUF, on
transformers' dequantization of the file; and llama.cpp's logits when llama-cpp-python is
installed): per layer the largest |app − HF|, the top-1 agreement, and the verdict against
1e-4 (io/hf_check.py). Status 0 when it passes, 1 when it fails, 3 when the check could not
run (torch or transformers missing, a model transformers cannot read)."""
from __future__ import annotations

import argparse
import sys

from ..core.model.errors import ModelError
from .console import say


def add_parser(sub) -> None:
    parser = sub.add_parser("check", help="the app's numbers checked against Hugging Face "
                                          "transformers on your model (needs torch + transformers)")
    parser.add_argument("--model", required=True, help="HF folder or .gguf file")
    parser.add_argument("--text", required=True)
    parser.set_defaults(run=run_check)


def run_check(args: argparse.Namespace) -> int:
    from ..io.hf_check import run_check as check
    from ..io.loader import load_model

    if not args.text.strip():
        raise ModelError("--text: give a text to run")
    model = load_model(args.model)
    if getattr(model, "is_seq2seq", False):
        raise ModelError(f"{args.model}: an encoder–decoder model; check runs encoders and decoders")
    for warning in model.warnings:
        say(f"warning: {warning}", sys.stderr)
    trace = model.trace(args.text)
    llama = " and llama.cpp" if str(args.model).lower().endswith(".gguf") else ""
    say(f"{args.model}: {trace.n_seq} tokens; running Hugging Face transformers{llama}, each in its own "
        "process ...")
    outcome = check(args.model, trace)
    for line in outcome.lines():
        say(line)
    if outcome.result is None:
        return 3
    say(f"({outcome.seconds:.1f} s)")
    return 0 if outcome.result.passed else 1
