"""`transformer-stepper generate --model PATH --text TEXT [--tokens N] [--temperature T]
[--top-k K] [--top-p P] [--seed S] [--trace FILE.npz]`: continue a text token by token (causal
models with a head) and print the continuation; optionally write the final trace."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import ModelError
from .console import say


def add_parser(sub) -> None:
    parser = sub.add_parser("generate", help="continue a text token by token (decoders), print the continuation")
    parser.add_argument("--model")
    parser.add_argument("--text", required=True)
    parser.add_argument("--tokens", type=int, default=20, help="how many tokens to add (default 20)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    parser.add_argument("--top-k", type=int, default=0, help="0 = off")
    parser.add_argument("--top-p", type=float, default=1.0, help="1 = off")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace", help="also write the final trace as .npz")
    parser.set_defaults(run=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    from ..core.generate import Sampling, generate
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
    model = load_model(args.model)
    for warning in model.warnings:
        say(f"warning: {warning}", sys.stderr)
    if not model.can_generate:
        raise ModelError(f"{model.name}: generation needs a causal model with an output head "
                         f"(this is a {model.config.family} {'encoder' if not model.config.causal else 'model without a head'})")
    prompt = model.trace(args.text)
    steps = generate(model, prompt, args.tokens, sampling)
    final = steps[-1] if steps else prompt
    if len(steps) < args.tokens:
        say(f"warning: the context is full ({model.config.n_ctx} tokens): stopped after "
            f"{len(steps)} tokens", sys.stderr)
    say(final.text[len(prompt.text):])
    if out is not None:
        save_npz(out, final)
        say(f"wrote {out}: {final.n_seq} tokens ({len(steps)} generated)", sys.stderr)
    return 0
