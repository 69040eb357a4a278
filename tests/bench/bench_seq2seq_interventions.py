"""The translation window's Interventions page, timed on a random model shaped like
Helsinki-NLP/opus-mt-en-de (bench_seq2seq.marian_base: d_model 512, 6 + 6 layers, 58101-token
vocabulary): a source of about 40 tokens and a 20-token target; the intervened pass with each
stack's difference at every stage (intervene_and_compare), and the clean and intervened greedy
translations (20 tokens each: random weights never reach EOS). What the worker runs per change.

    PYTHONPATH=desktop python tests/bench/bench_seq2seq_interventions.py"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    from bench_seq2seq import marian_base
    from transformer_stepper.core.model.interventions import AblateHead
    from transformer_stepper.core.analysis.seq2seq_differences import (
        intervene_and_compare,
        translations)
    from transformer_stepper.core.model.seq2seq_interventions import InStack
    from transformer_stepper.core.trace.seq2seq_model import Seq2SeqModel
    from transformer_stepper.io.loader import load_model
    from transformer_stepper.runtime import tune_process

    tune_process()
    config, params = marian_base()
    tokenizer = load_model(str(Path(__file__).resolve().parents[2] / "resources" / "translator")).tokenizer
    model = Seq2SeqModel(config, params, tokenizer)
    source = " ".join(["the old man saw the red bank near the river ."] * 4)
    target_ids = np.random.default_rng(2).integers(1, 58000, 20)
    start = time.perf_counter()
    clean = model.trace(source, target_ids=target_ids)
    traced = time.perf_counter() - start
    ablate = [InStack("cross", AblateHead(3, 2))]
    start = time.perf_counter()
    _, _, differences = intervene_and_compare(model, clean, ablate)
    compared = time.perf_counter() - start
    start = time.perf_counter()
    translations(model, source, ablate, n_tokens=20)
    translated = time.perf_counter() - start
    print(f"source {clean.encoder.n_seq} tokens, target {clean.decoder.n_seq}: clean trace {traced:.2f} s, "
          f"intervened pass + differences of both stacks {compared:.2f} s "
          f"({len(differences['Encoder']) + len(differences['Decoder'])} arrays compared), "
          f"two greedy translations of 20 tokens {translated:.2f} s")


if __name__ == "__main__":
    main()
