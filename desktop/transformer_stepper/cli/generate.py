"""`transformer-stepper generate --model PATH --text TEXT [--tokens N] [--temperature T]
[--top-k K] [--top-p P] [--seed S] [--trace FILE.npz]`: continue a text token by token (causal
models with a head) and print the continuation; optionally write the final trace. An
encoder–decoder takes --source TEXT [--target TEXT] and prints the translation (to EOS)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.model.errors import ModelError
from . import seq2seq
from .console import say


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "generate", help="continue a text token by token (decoders), print the continuation",
        description="Continue --text token by token. Prints only the continuation on stdout (the text "
                    "after the prompt, spelled as its tokens spell it, so it often starts with a space); "
                    "stderr names the prompt and how many tokens were added.")
    parser.add_argument("--model", help="HF folder, .safetensors, .gguf or .npz (default: built-in model)")
    parser.add_argument("--text", help="the prompt to continue")
    seq2seq.add_arguments(parser)
    parser.add_argument("--tokens", type=int, default=20, help="how many tokens to add (default 20)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    parser.add_argument("--top-k", type=int, default=0, help="0 = off")
    parser.add_argument("--top-p", type=float, default=1.0, help="1 = off")
    parser.add_argument("--seed", type=int, default=0, help="the sampling's random seed (default 0)")
    parser.add_argument("--trace", help="also write the final trace (prompt and continuation) as .npz")
    parser.set_defaults(run=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    from ..core.trace.generate import Sampling, generate
    from ..io.array_export import save_npz
    from ..io.loader import load_model

    out = Path(args.trace) if args.trace else None
    if out is not None and out.suffix.lower() != ".npz":
        raise ModelError(f"{out}: the trace file must end in .npz")
    if out is not None and not out.parent.is_dir():
        raise ModelError(f"{out.parent}: folder does not exist")
    if args.tokens < 1:
        raise ModelError(f"--tokens must be at least 1, got {args.tokens}")
    sampling = Sampling(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    seq2seq.check_text(args)
    model = load_model(args.model)
    for warning in model.warnings:
        say(f"warning: {warning}", sys.stderr)
    if seq2seq.is_seq2seq(model):
        return _translate(args, model, sampling, out)
    args.text = seq2seq.text_for(args, model)
    if not model.can_generate:
        raise ModelError(f"{model.name}: generation needs a causal model with an output head "
                         f"(this is a {model.config.family} {'encoder' if not model.config.causal else 'model without a head'})")
    prompt = model.trace(args.text)
    steps = generate(model, prompt, args.tokens, sampling)
    final = steps[-1] if steps else prompt
    if len(steps) < args.tokens:
        say(f"warning: the context is full ({model.config.n_ctx} tokens): stopped after "
            f"{len(steps)} tokens", sys.stderr)
    how = "greedy" if sampling.temperature == 0 else f"temperature {sampling.temperature:g}, seed {sampling.seed}"
    say(f"the continuation of {prompt.text!r} ({len(steps)} tokens, {how}) follows; the prompt is not "
        f"repeated", sys.stderr)
    say(final.text[len(prompt.text):])
    if out is not None:
        save_npz(out, final)
        say(f"wrote {out}: {final.n_seq} tokens ({len(steps)} generated)", sys.stderr)
    return 0


def _translate(args: argparse.Namespace, model, sampling, out) -> int:
    """Encoder once, decoder step by step from the start token (after --target) to EOS; prints
    the target text."""
    from ..core.trace.seq2seq_generate import finished, generate as generate_target
    from ..io.array_export import save_npz

    interventions = seq2seq.interventions_of(args)
    first = seq2seq.seq2seq_trace(args, model, interventions)
    steps = generate_target(model, first, args.tokens, sampling)
    final = steps[-1] if steps else first
    if not finished(model, final):
        say(f"warning: stopped after {len(steps)} tokens without reaching the end-of-sentence token",
            sys.stderr)
    tokenizer = model.target_tokenizer
    ids = [int(i) for i in final.decoder.input_ids[1:] if i != model.config.eos_token_id]
    text = "".join(tokenizer.continuation([], ids)).strip()
    if interventions:               # the clean translation beside it, by the same sampling
        from ..core.model.seq2seq_interventions import describe_all

        clean_steps = generate_target(model, model.intervene(first, ()), args.tokens, sampling)
        clean_ids = [int(i) for i in (clean_steps[-1] if clean_steps else first).decoder.input_ids[1:]
                     if i != model.config.eos_token_id]
        say(f"clean:      {''.join(tokenizer.continuation([], clean_ids)).strip()}")
        say(f"intervened: {text}   {describe_all(interventions)}")
    else:
        say(text)
    if out is not None:
        save_npz(out, final)
        say(f"wrote {out}: {final.decoder.n_seq} decoder tokens ({len(steps)} generated)", sys.stderr)
    return 0
