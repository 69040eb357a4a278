"""`transformer-stepper trace --model PATH --text TEXT --out FILE.npz`: every intermediate of
one forward pass, written as .npz (no pickle). An encoder–decoder takes --source TEXT [--target
TEXT] and writes encoder_*, decoder_*, cross_attentions and logits (Seq2SeqTrace.to_dict); with
--ablate / --no-source-positions the intervened pass's, after printing each stack's difference
from the clean pass at every stage."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


from ..core.model.errors import ModelError
from . import seq2seq
from .console import say, warn_non_finite


def add_parser(sub) -> None:
    parser = sub.add_parser("trace", help="write every intermediate of one forward pass to .npz")
    parser.add_argument("--model", help="HF folder, .safetensors or .npz (default: built-in model)")
    parser.add_argument("--text")
    seq2seq.add_arguments(parser)
    parser.add_argument("--out", required=True, help="output .npz")
    parser.set_defaults(run=run_trace)


def npz_count(path: Path) -> int:
    """How many arrays the written file holds (its zip directory: nothing is read)."""
    import numpy as np

    with np.load(path, allow_pickle=False) as held:
        return len(held.files)


def run_trace(args: argparse.Namespace) -> int:
    from ..io.array_export import save_npz
    from ..io.loader import load_model

    out = Path(args.out)
    if out.suffix.lower() != ".npz":  # checked before the slow part
        raise ModelError(f"{out}: the output file must end in .npz")
    if not out.parent.is_dir():
        raise ModelError(f"{out.parent}: folder does not exist")
    seq2seq.check_text(args)
    model = load_model(args.model)
    for warning in model.warnings:
        say(f"warning: {warning}", sys.stderr)
    if seq2seq.is_seq2seq(model):
        interventions = seq2seq.interventions_of(args)
        trace = seq2seq.seq2seq_trace(args, model, interventions)
        if interventions:
            seq2seq.say_differences(model, model.intervene(trace, ()), trace)
        save_npz(out, trace)
        say(f"wrote {out}: {trace.encoder.n_seq} source, {trace.decoder.n_seq} decoder tokens")
        return 0
    trace = model.trace(seq2seq.text_for(args, model))
    if trace.truncated:
        say(f"warning: the text is longer than the model's context; truncated to "
            f"{model.config.n_ctx} tokens", sys.stderr)
    warn_non_finite(model, trace)
    save_npz(out, trace)  # atomic; an OSError becomes one ModelError line naming the file
    say(f"wrote {out}: {trace.n_seq} tokens, {npz_count(out)} arrays")
    return 0
